"""The playground page at `/` in headless Chromium (Debian's, driven by Playwright), against `agent-core serve`:
the offline model for tools, frontend tools and cancel; the scripted OpenAI stub for reasoning, lockstep
streaming and a model failure. One browser for the module; each test gets its own context and user.

Screenshots of the main states go to a temporary directory, or to PLAYGROUND_SCREENSHOTS_DIR (the README's
images: `PLAYGROUND_SCREENSHOTS_DIR=docs/images .venv/bin/python -m pytest tests/e2e/test_playground.py`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.store import items as it
from agent_core.store.embedded import DATABASE_FILE
from tests.support.cut_proxy import cut_proxy
from tests.support.links import unsigned
from tests.support.local_server import local_server
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import free_port
from tests.support.wait import poll_until

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency (make install)")
expect = playwright_api.expect

CHROMIUM = "/usr/bin/chromium"
# Debian's Chromium as root, on a machine with no outside network: no sandbox, no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 30_000  # an upper bound for the page to catch up on a loaded machine, not a timing assertion
WIDE = (1280, 800)  # a laptop
MIDDLE = (800, 700)  # a small window, a tablet
NARROW = (390, 844)  # a phone
SMALLEST = (360, 740)  # the narrowest width the layout is made for

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"no {CHROMIUM}: install Debian's chromium package (`apt-get install -y chromium`; .ci/run does)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    expect.set_options(timeout=WAIT_MS)
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def offline() -> Iterator[str]:
    with local_server() as (base, _process):
        yield base


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAiStub]:
    with OpenAiStub() as server:
        yield server


BOOKING_AGENT = """
key: booking
name: Booking
description: Books tables; the page confirms.
mode: function
tools: [time]
frontendTools:
  - name: confirm_booking
    description: Show the booking to the user, who confirms or changes it.
    parameters: {type: object, properties: {date: {type: string}, guests: {type: integer}}, required: [date]}
actions:
  - name: highlight_city
    description: Highlight a city on the client's map.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
"""


@pytest.fixture(scope="module")
def stubbed(stub: OpenAiStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    definitions = tmp_path_factory.mktemp("agents")
    (definitions / "booking.yaml").write_text(BOOKING_AGENT)
    env = {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "sk-local", "AGENT_LLM_MAX_RETRIES": "0"}
    env["AGENT_DEFINITIONS_DIR"] = str(definitions)
    with local_server(**env) as (base, _process):
        yield base


@pytest.fixture(scope="module")
def budgeted() -> Iterator[str]:
    """The offline model with a daily token budget of 1: a user's first turn spends it, the next is refused."""
    with local_server(AGENT_USAGE_DAILY_TOKEN_BUDGET="1") as (base, _process):
        yield base


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("PLAYGROUND_SCREENSHOTS_DIR")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _page(browser: Any, base: str, user: str, size: tuple[int, int] = WIDE) -> Any:
    """A fresh browser context whose page is signed in as `user` (the token box, as a person would)."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(base + "/")
    page.locator("#token").fill(user)
    page.locator("#token").press("Enter")
    expect(page.get_by_test_id("agent-picker").locator("option")).not_to_have_count(0)
    return page


def _send(page: Any, message: str) -> None:
    page.get_by_test_id("composer").fill(message)
    page.get_by_test_id("send").click()


# Each element's own overflow (scrollWidth past clientWidth) and its box, in viewport coordinates.
_BOXES_JS = """(selector) => [...document.querySelectorAll(selector)].map((e) => {
  const r = e.getBoundingClientRect();
  return {what: `${e.tagName}.${e.className}#${e.id}`, scrollWidth: e.scrollWidth, clientWidth: e.clientWidth,
          left: r.left, right: r.right, top: r.top, bottom: r.bottom};
})"""


def _boxes(page: Any, selector: str) -> list[dict[str, Any]]:
    return list(page.evaluate(_BOXES_JS, selector))


def _fits_the_width(page: Any, selector: str) -> None:
    """Every element `selector` finds shows all of its content and lies within the viewport's width, and the
    page itself does not scroll sideways."""
    width = page.viewport_size["width"]
    boxes = _boxes(page, selector)
    assert boxes, selector
    for box in boxes:
        assert box["scrollWidth"] <= box["clientWidth"], box
        assert box["left"] >= 0 and box["right"] <= width, box
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def _in_view(page: Any, locator: Any) -> None:
    """`locator`'s whole box is on screen: inside the viewport and inside the scrolled messages box."""
    box = locator.bounding_box()
    shown = page.locator("#messages").bounding_box()
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    assert box is not None and shown is not None
    bottom, right = box["y"] + box["height"], box["x"] + box["width"]
    assert box["x"] >= 0 and right <= width and box["y"] >= 0 and bottom <= height, (box, width, height)
    assert shown["y"] <= box["y"] and bottom <= shown["y"] + shown["height"], (box, shown)


def _done(page: Any, count: int) -> None:
    """Wait until `count` runs of the page ended (each ends with one terminal line)."""
    expect(page.locator(".message.assistant .meta").filter(has_text="done (")).to_have_count(count)


def test_an_answer_streams_token_by_token_with_reasoning_collapsed(
    browser: Any, stubbed: str, stub: OpenAiStub, shots: Path
) -> None:
    # The stub sends chunk n only once the page has shown chunk n-1: each piece is on screen before the
    # next one exists, so the page renders deltas as they arrive (no buffering).
    releases = [threading.Event() for _ in range(8)]
    script = StubScript.text("Hello", " from", " the stub.", reasoning=["Thinking", " it over"])
    script.before_chunk = lambda n: releases[n].wait(timeout=60)
    stub.enqueue(script)
    page = _page(browser, stubbed, "streamer")
    _send(page, "say hello")
    expect(page.get_by_test_id("message-user")).to_have_text("say hello")
    expect(page.get_by_test_id("composer")).to_have_value("")  # the server took it: the composer is empty
    reasoning = page.locator("details.reasoning")
    answer = page.get_by_test_id("message-assistant").locator(".content")
    expect(reasoning.locator("pre")).to_have_text("Thinking")
    expect(reasoning).not_to_have_attribute("open", "")  # collapsed
    expect(page.get_by_test_id("cancel")).to_be_enabled()
    releases[1].set()
    expect(reasoning.locator("pre")).to_have_text("Thinking it over")
    expect(answer).to_have_count(0)
    for n, shown in [(2, "Hello"), (3, "Hello from"), (4, "Hello from the stub.")]:
        releases[n].set()
        expect(answer).to_have_text(shown)
        if n == 3:
            page.screenshot(path=shots / "playground-streaming.png")
    for release in releases:
        release.set()
    _done(page, 1)
    expect(page.get_by_test_id("send")).to_be_enabled()
    expect(page.get_by_test_id("cancel")).to_be_disabled()
    # The new chat is listed and current
    expect(page.get_by_test_id("chat-list").locator("li.current")).to_have_text("say hello")
    page.context.close()


def test_parallel_tool_cards_a_data_link_then_reload_replays_the_same(browser: Any, offline: str, shots: Path) -> None:
    page = _page(browser, offline, "tools-user")
    _send(page, "what time is it in Tokyo and in London?")
    _done(page, 1)
    cards = page.get_by_test_id("tool-card")
    expect(cards).to_have_count(2)
    for card, zone in zip(cards.all(), ["Asia/Tokyo", "Europe/London"], strict=True):
        assert card.get_attribute("data-tool-name") == "time"
        expect(card).to_have_attribute("data-status", "ok")
        expect(card.locator(".args")).to_contain_text(zone)
        expect(card.locator(".result")).to_contain_text('"weekday"')
        expect(card.locator(".duration")).to_contain_text(" ms")
    # Both calls belong to one step of one answer
    expect(page.get_by_test_id("message-assistant").first.get_by_test_id("tool-card")).to_have_count(2)
    page.screenshot(path=shots / "playground-tools.png")

    # A data file, opened through its signed link
    _send(page, "save this as notes.txt: meet at 3pm")
    _done(page, 2)
    link = page.get_by_test_id("data-link")
    expect(link).to_have_text("Open notes.txt")
    download = httpx.get(offline + str(link.get_attribute("href")), timeout=30)
    assert download.status_code == 200 and download.text == "meet at 3pm"

    # Reload: the chat is reopened from GET /api/ap/chat and reads exactly as it did live
    # (data links are signed when read: the reopened chat carries fresh tokens, which work too)
    live = unsigned(page.locator("#messages").inner_text())
    page.reload()
    _done(page, 2)
    assert unsigned(page.locator("#messages").inner_text()) == live
    expect(page.get_by_test_id("tool-card")).to_have_count(3)
    reopened = httpx.get(offline + str(page.get_by_test_id("data-link").get_attribute("href")), timeout=30)
    assert reopened.status_code == 200 and reopened.text == "meet at 3pm"

    # New chat empties the page; the list opens the stored one again, the same
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("message-user")).to_have_count(0)
    page.get_by_test_id("chat-list").locator("li button").first.click()
    _done(page, 2)
    assert unsigned(page.locator("#messages").inner_text()) == live
    page.context.close()


def test_ask_user_form_answered_and_the_run_completes(browser: Any, offline: str, shots: Path) -> None:
    page = _page(browser, offline, "asked-user")
    _send(page, 'ask me to pick "tea" or "coffee"')
    form = page.get_by_test_id("frontend-tool-form")
    expect(form).to_be_visible()
    expect(form.locator(".question")).to_contain_text("tea")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "waiting")
    expect(page.get_by_test_id("cancel")).to_be_enabled()  # the run is waiting for the page
    page.screenshot(path=shots / "playground-ask-user.png")
    form.get_by_role("button", name="coffee").click()
    _done(page, 1)
    expect(form).to_have_count(0)
    expect(card).to_have_attribute("data-status", "ok")
    expect(card.locator(".submitted")).to_contain_text('"answer":"coffee"')
    # The run went on with the answer: the model's reply quotes it
    expect(page.get_by_test_id("message-assistant").locator(".content")).to_contain_text('"answer": "coffee"')
    page.context.close()


def test_cancel_ends_a_waiting_run(browser: Any, offline: str) -> None:
    page = _page(browser, offline, "canceller")
    _send(page, "ask me anything")
    expect(page.get_by_test_id("frontend-tool-form")).to_be_visible()
    page.get_by_test_id("cancel").click()
    expect(page.locator(".message.assistant .meta").filter(has_text="cancelled")).to_have_count(1)
    expect(page.get_by_test_id("frontend-tool-form")).to_have_count(0)
    expect(page.get_by_test_id("tool-card")).to_have_attribute("data-status", "not answered")
    expect(page.get_by_test_id("send")).to_be_enabled()
    # The chat takes the next message at once (the cancelled run released it)
    _send(page, "hello again")
    _done(page, 1)
    page.context.close()


def test_errors_are_shown_readably(browser: Any, offline: str, stubbed: str, stub: OpenAiStub, shots: Path) -> None:
    # 409: a second page sends to a chat whose run is still waiting for the first page
    first = _page(browser, offline, "busy-user")
    _send(first, "ask me to choose")
    expect(first.get_by_test_id("frontend-tool-form")).to_be_visible()
    chat_url = first.url
    assert "#chat=" in chat_url
    second = first.context.new_page()
    second.goto(chat_url)
    expect(second.get_by_test_id("chat-list").locator("li.current")).to_have_count(1)  # the chat is open
    _send(second, "are you there?")
    error = second.get_by_test_id("error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("409 run_in_progress")
    expect(error).to_contain_text("answering another message")
    expect(second.get_by_test_id("composer")).to_have_value("are you there?")  # refused: given back to resend
    expect(second.get_by_test_id("send")).to_be_enabled()
    second.screenshot(path=shots / "playground-error.png")
    first.get_by_test_id("cancel").click()
    expect(first.locator(".message.assistant .meta").filter(has_text="cancelled")).to_have_count(1)

    # 413: a message over the server's bound is refused before any work
    _send(first, "x" * 40_000)
    expect(first.get_by_test_id("error")).to_contain_text("413")
    expect(first.get_by_test_id("error")).to_contain_text("too large")
    expect(first.get_by_test_id("composer")).to_have_value("x" * 40_000)  # kept, to be shortened and resent

    # A network error (the browser's request fails): the message is given back too, in front of what was
    # typed while it was on its way, and sends once the line is up
    composer = first.get_by_test_id("composer")
    held: list[Any] = []
    first.route("**/api/ap/query", lambda route: held.append(route))  # the request waits here until aborted
    _send(first, "hello over a dead line")
    expect(composer).to_have_value("")
    composer.fill("and a second thought")
    for _ in range(WAIT_MS // 50):  # the route handler runs while Playwright waits
        if held:
            break
        first.wait_for_timeout(50)
    held[0].abort("internetdisconnected")
    expect(first.get_by_test_id("error")).to_contain_text("Failed to fetch")
    expect(composer).to_have_value("hello over a dead line\nand a second thought")
    first.unroute("**/api/ap/query")
    composer.fill("hello over a dead line")
    first.get_by_test_id("send").click()
    _done(first, 1)
    expect(first.get_by_test_id("composer")).to_have_value("")
    expect(first.get_by_test_id("message-user").last).to_have_text("hello over a dead line")
    first.context.close()

    # The model is down: the run's terminal run.error, shown as the 502 it is on the buffered routes
    stub.enqueue(StubScript.error(503, "upstream overloaded"))
    page = _page(browser, stubbed, "unlucky-user")
    _send(page, "hello?")
    expect(page.get_by_test_id("error")).to_contain_text("llm_unavailable")
    expect(page.get_by_test_id("error")).to_contain_text("model could not be reached")
    expect(page.locator(".meta.failed")).to_contain_text("llm_unavailable")
    page.get_by_test_id("error").get_by_role("button").click()
    expect(page.get_by_test_id("error")).to_be_hidden()
    page.context.close()


def test_a_budget_refusal_says_why_and_when_to_try_again(browser: Any, budgeted: str) -> None:
    page = _page(browser, budgeted, "thrifty-user")
    _send(page, "hello")
    _done(page, 1)  # the first turn spends the day's budget
    _send(page, "and again")
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("budget_exceeded: today's usage budget is spent; it renews at midnight")
    expect(error).to_contain_text("try again in ")  # the refusal's retryAfter, as a span and a clock time
    expect(error).not_to_contain_text("500")  # a refusal is not a server failure
    expect(page.get_by_test_id("composer")).to_have_value("and again")  # nothing was stored: given back
    expect(page.get_by_test_id("message-user")).to_have_count(1)
    page.context.close()


def test_agent_picker_and_profile(browser: Any, offline: str, shots: Path) -> None:
    page = _page(browser, offline, "profile-user")
    picker = page.get_by_test_id("agent-picker")
    keys = [o.get_attribute("value") for o in picker.locator("option").all()]
    assert "main-agent" in keys
    page.locator("#profile-toggle").click()
    profile = page.get_by_test_id("profile")
    expect(profile).to_be_visible()
    expect(profile.locator("#profile-user")).to_have_text("profile-user")
    page.locator("#timezone").fill("Europe/Paris")
    profile.get_by_role("button", name="Set").click()
    expect(page.locator("#timezone")).to_have_value("Europe/Paris")
    stored = httpx.get(offline + "/api/ap/profile", headers={"X-User-Id": "profile-user"}, timeout=30).json()
    assert stored["timezone"] == "Europe/Paris"
    page.screenshot(path=shots / "playground-profile.png")
    # A bad zone is the server's 400, shown
    page.locator("#timezone").fill("Mars/Olympus")
    profile.get_by_role("button", name="Set").click()
    expect(page.get_by_test_id("error")).to_contain_text("400 invalid_timezone")
    # Erase (the confirm dialog is accepted): the zone is the default again
    profile.get_by_role("button", name="Erase profile").click()
    default = httpx.get(offline + "/api/ap/profile", headers={"X-User-Id": "someone-else"}, timeout=30).json()
    expect(page.locator("#timezone")).to_have_value(default["timezone"])
    erased = httpx.get(offline + "/api/ap/profile", headers={"X-User-Id": "profile-user"}, timeout=30).json()
    assert erased["timezone"] == default["timezone"] != "Europe/Paris"
    page.context.close()


def test_an_agents_own_frontend_tool_and_ui_action(browser: Any, stubbed: str, stub: OpenAiStub) -> None:
    calls = [
        {"id": "call_book", "name": "confirm_booking", "arguments": {"date": "2026-12-01", "guests": 2}},
        {"id": "call_map", "name": "highlight_city", "arguments": {"city": "Paris"}},
    ]
    stub.enqueue(StubScript.tool_calls(calls), StubScript.text("Booked for three."))
    page = _page(browser, stubbed, "booker")
    page.get_by_test_id("agent-picker").select_option("booking")
    _send(page, "book a table in Paris on December 1st for two")
    # The UI action is a card of its own; the frontend tool's form starts from the model's arguments
    action = page.get_by_test_id("action-card")
    expect(action).to_contain_text("highlight_city")
    expect(action.locator(".args")).to_contain_text('"city":"Paris"')
    form = page.get_by_test_id("frontend-tool-form")
    editor = form.locator("textarea")
    expect(editor).to_have_value('{\n  "date": "2026-12-01",\n  "guests": 2\n}')
    editor.fill('{"date": "2026-12-01", "guests": 3, "confirmed": true}')
    form.get_by_role("button", name="Submit").click()
    _done(page, 1)
    expect(page.get_by_test_id("message-assistant").locator(".content")).to_have_text("Booked for three.")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-tool-name", "confirm_booking")
    expect(card).to_have_attribute("data-status", "ok")
    # The run went on with what the page submitted, as the tool's result
    results = {m["tool_call_id"]: m["content"] for r in stub.requests for m in r["messages"] if m["role"] == "tool"}
    assert '"guests": 3' in results["call_book"] and '"confirmed": true' in results["call_book"]
    page.context.close()


# A presigned S3 link as a data tool hands out: one "word" of ~900 characters with no place to break.
SIGNED_URL = (
    "https://agent-core-data-123456789012.s3.eu-west-1.amazonaws.com/users/wrapper/files/report.pdf"
    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAEXAMPLEKEY%2F20261126%2Feu-west-1%2Fs3%2Faws4_request"
    "&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=" + "IQoJb3JpZ2luX2VjEXAMPLE" * 30 + "%3D"
    "&X-Amz-Signature=" + "9f86d081884c7d659a2feaa0c55ad015" * 2
)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["1280px", "390px"])
def test_a_long_link_wraps_inside_its_message(browser: Any, offline: str, shots: Path, size: tuple[int, int]) -> None:
    page = _page(browser, offline, f"wrapper-{size[0]}", size)
    _send(page, f"here is the link: {SIGNED_URL} and a token {'x' * 300}")
    _done(page, 1)  # the offline model quotes the message back: the answer holds the link too
    expect(page.get_by_test_id("message-assistant").locator(".content")).to_contain_text(SIGNED_URL)
    _fits_the_width(page, ".message, .message .content, #messages, main")
    if size == NARROW:
        page.screenshot(path=shots / "playground-narrow-long-link.png")
    page.context.close()


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["1280px", "390px"])
def test_the_ask_user_form_is_brought_into_view(browser: Any, offline: str, shots: Path, size: tuple[int, int]) -> None:
    page = _page(browser, offline, f"scrolled-user-{size[0]}", size)
    # A first turn taller than the messages box (the message, then the answer quoting it)
    _send(page, "\n".join(f"line {n} of a long note" for n in range(40)))
    _done(page, 1)
    _send(page, 'ask me to pick "tea" or "coffee"')
    form = page.get_by_test_id("frontend-tool-form")
    expect(form).to_be_visible()
    _in_view(page, form)  # the form was added below the last line: the box scrolled to it
    _fits_the_width(page, ".message, .card, .frontend-form")
    if size == NARROW:
        page.screenshot(path=shots / "playground-narrow-ask-user.png")
    # Scrolled up to read, the reader stays there while the run goes on
    page.locator("#messages").evaluate("(box) => { box.scrollTop = 0; }")
    form.get_by_role("button", name="tea").dispatch_event("click")  # (a click() would scroll to the button)
    _done(page, 2)
    assert page.locator("#messages").evaluate("(box) => box.scrollTop") == 0
    # ... and their next message brings them back to the end, following the answer as it comes
    _send(page, "thanks")
    _done(page, 3)
    _in_view(page, page.locator(".message.assistant .meta").filter(has_text="done (").last)
    page.context.close()


def test_a_form_comes_into_view_while_the_reader_is_scrolled_up(browser: Any, stubbed: str, stub: OpenAiStub) -> None:
    # The stub holds the tool call until the reader has scrolled back to the top of a long chat: the form
    # then appears far below what they look at, and is brought into view (it waits for them).
    release = threading.Event()
    held = StubScript.tool_calls([{"id": "call_book", "name": "confirm_booking", "arguments": {"date": "2026-12-01"}}])
    held.before_chunk = lambda n: release.wait(timeout=60)
    long_answer = StubScript.text(*[f"line {n} of a long answer\n" for n in range(60)])
    stub.enqueue(long_answer, held, StubScript.text("Booked."))
    page = _page(browser, stubbed, "reader", NARROW)
    page.get_by_test_id("agent-picker").select_option("booking")
    _send(page, "tell me a long story")
    _done(page, 1)
    _send(page, "book a table on December 1st")
    expect(page.get_by_test_id("message-user")).to_have_count(2)
    page.locator("#messages").evaluate("(box) => { box.scrollTop = 0; }")
    release.set()
    form = page.get_by_test_id("frontend-tool-form")
    expect(form).to_be_visible()
    _in_view(page, form)
    form.get_by_role("button", name="Submit").click()
    _done(page, 2)
    page.context.close()


@pytest.mark.parametrize("size", [WIDE, MIDDLE, NARROW, SMALLEST], ids=["1280px", "800px", "390px", "360px"])
def test_the_chat_keeps_its_width_with_the_profile_open(
    browser: Any, offline: str, shots: Path, size: tuple[int, int]
) -> None:
    page = _page(browser, offline, f"narrow-user-{size[0]}", size)
    _send(page, "what time is it in Tokyo and in London?")
    _done(page, 1)
    page.locator("#profile-toggle").click()
    profile = page.get_by_test_id("profile")
    expect(profile.locator("#profile-user")).to_have_text(f"narrow-user-{size[0]}")
    # The chat pane and the profile are both on screen, side by side or stacked, and the composer is usable
    composer = page.get_by_test_id("composer").bounding_box()
    shown = page.locator("#messages").bounding_box()
    assert composer is not None and shown is not None
    assert composer["width"] >= 250, composer
    assert shown["width"] >= min(400, size[0] * 0.9), shown  # narrow: (nearly) the full width
    assert shown["height"] >= 200, shown
    expect(page.get_by_test_id("message-user")).to_be_in_viewport()
    for control in ["#agent", "#token", "#profile-toggle", "header a", "#send", "#cancel", "#new-chat"]:
        box = page.locator(control).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= size[0], (control, box)
    _fits_the_width(page, "header, main, aside, nav, .message, .card, #composer-form")
    # The chat list: beside the chat when there is room, else folded behind "Chats"
    listed = page.get_by_test_id("chat-list")
    toggle = page.get_by_test_id("chats-toggle")
    if size in (WIDE, MIDDLE):
        expect(toggle).to_be_hidden()
        expect(listed.locator("li")).to_have_count(1)
        expect(listed).to_be_visible()
    else:
        expect(toggle).to_have_text("Chats (1)")
        expect(listed).to_be_hidden()
        if size == NARROW:
            page.screenshot(path=shots / "playground-narrow-profile.png")
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(listed.locator("li.current")).to_be_visible()
        page.get_by_test_id("new-chat").click()  # starting (or opening) a chat folds the list again
        expect(listed).to_be_hidden()
        expect(page.get_by_test_id("message-user")).to_have_count(0)
        toggle.click()
        listed.locator("li button").first.click()
        expect(listed).to_be_hidden()
        _done(page, 1)
        _fits_the_width(page, ".message, .card")
    page.context.close()


@pytest.fixture(scope="module")
def gated() -> Iterator[str]:
    """The offline model's server with every `time` call waiting for approval (the deployment's rule)."""
    with local_server(AGENT_TOOL_APPROVAL='{"time": "always"}') as (base, _process):
        yield base


def test_approval_cards_approve_one_call_and_deny_another(browser: Any, gated: str, shots: Path) -> None:
    page = _page(browser, gated, "approver")
    _send(page, "what time is it in Tokyo and in London?")
    forms = page.get_by_test_id("approval-form")
    expect(forms).to_have_count(2)
    tokyo = page.get_by_test_id("tool-card").filter(has_text="Asia/Tokyo")
    london = page.get_by_test_id("tool-card").filter(has_text="Europe/London")
    # Each card names the tool, shows its arguments and why it asks, and waits
    for card, zone in ((tokyo, "Asia/Tokyo"), (london, "Europe/London")):
        expect(card).to_have_attribute("data-status", "waiting")
        expect(card.locator(".name")).to_have_text("time")
        expect(card.get_by_test_id("approval-form").locator(".approval-args")).to_contain_text(zone)
        expect(card.get_by_test_id("approval-reason")).to_have_text("Needs approval: time always needs approval")
    page.screenshot(path=shots / "playground-approval.png")
    tokyo.get_by_role("button", name="Approve").click()
    expect(tokyo.get_by_test_id("approval-outcome")).to_have_text("approved")
    london.get_by_label("reason").fill("not London")
    london.get_by_role("button", name="Deny").click()
    expect(london.get_by_test_id("approval-outcome")).to_have_text("denied")
    _done(page, 1)
    # The approved call ran; the denied one did not, and says why
    expect(forms).to_have_count(0)
    expect(tokyo).to_have_attribute("data-status", "ok")
    expect(london).to_have_attribute("data-status", "denied")
    expect(london.locator(".result")).to_contain_text("approval_denied")
    expect(london.locator(".result")).to_contain_text("not London")
    page.context.close()


def _checkpointed(data_dir: Path) -> bool:
    """A run in the directory's database has stored its checkpoint (it waits on people)."""
    with contextlib.closing(sqlite3.connect(data_dir / DATABASE_FILE)) as db:
        return db.execute("SELECT 1 FROM items WHERE sk = ?", (it.CHECKPOINT,)).fetchone() is not None


def test_approval_cards_outlive_a_server_crash_and_the_run_goes_on_after_the_restart(
    browser: Any, tmp_path: Path
) -> None:
    # The server is killed (SIGKILL) while the page shows two approval cards; it starts again on the same
    # address and data. The page reconnects to the run's stream by itself, the person answers the cards, and
    # the run goes on from its checkpoint on the new process: the same message, each call's outcome, one answer.
    env = {
        "AGENT_TOOL_APPROVAL": '{"time": "always"}',
        "AGENT_DATA_DIR": str(tmp_path),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    port = free_port()
    with local_server(port=port, **env) as (base, process):
        page = _page(browser, base, "survivor")
        _send(page, "what time is it in Tokyo and in London?")
        forms = page.get_by_test_id("approval-form")
        expect(forms).to_have_count(2)
        poll_until(lambda: _checkpointed(tmp_path), "the waiting run's checkpoint", interval_s=0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    with local_server(port=port, **env):
        tokyo = page.get_by_test_id("tool-card").filter(has_text="Asia/Tokyo")
        london = page.get_by_test_id("tool-card").filter(has_text="Europe/London")
        tokyo.get_by_role("button", name="Approve").click()
        expect(tokyo.get_by_test_id("approval-outcome")).to_have_text("approved")
        london.get_by_label("reason").fill("not London")
        london.get_by_role("button", name="Deny").click()
        expect(london.get_by_test_id("approval-outcome")).to_have_text("denied")
        _done(page, 1)
        expect(tokyo).to_have_attribute("data-status", "ok")
        expect(london).to_have_attribute("data-status", "denied")
        expect(page.get_by_test_id("error")).to_be_hidden()
        assert page.get_by_test_id("message-assistant").count() == 1
        # And a reload replays the whole run once, from the store
        page.reload()
        page.locator("#token").fill("survivor")
        page.locator("#token").press("Enter")
        page.get_by_test_id("chat-list").locator("li button").first.click()
        expect(page.get_by_test_id("tool-card")).to_have_count(2)
        expect(page.get_by_test_id("message-assistant")).to_have_count(1)
    page.context.close()


def test_a_dropped_connection_resumes_by_itself_without_a_duplicate_token(
    browser: Any, stubbed: str, stub: OpenAiStub
) -> None:
    # The page talks to the server through a proxy that drops the answer's connection after "Hello" (and part
    # of the next message), as a network change does; the run goes on on the server. The page asks for the
    # events after the last one it showed (Last-Event-ID) and the answer completes, each token once.
    releases = [threading.Event() for _ in range(6)]
    script = StubScript.text("Hello", " from", " the stub.", " Bye.")
    script.before_chunk = lambda n: releases[n].wait(timeout=60)
    stub.enqueue(script)
    with cut_proxy(stubbed, arm=(b"POST /api/ap/query ",), marker=b'"delta":"Hello"') as (url, proxy):
        try:
            page = _page(browser, url, "resumer")
            _send(page, "say hello")
            answer = page.get_by_test_id("message-assistant").locator(".content")
            expect(answer).to_have_text("Hello")
            releases[1].set()  # " from" follows: the proxy cuts the connection inside its message
            expect(answer).to_have_text("Hello from")
            for release in releases:
                release.set()
            _done(page, 1)
            expect(answer).to_have_text("Hello from the stub. Bye.")
            expect(page.get_by_test_id("error")).to_be_hidden()
            expect(page.get_by_test_id("send")).to_be_enabled()
        finally:
            for release in releases:
                release.set()
    assert proxy.cut_count == 1
    resumes = [line for line in proxy.requests if line.startswith(b"GET /api/ap/runs/")]
    assert len(resumes) == 1, proxy.requests
    assert page.get_by_test_id("message-assistant").count() == 1
    page.context.close()
