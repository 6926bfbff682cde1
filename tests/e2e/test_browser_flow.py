"""A browser-style client against the local server (`make run`'s command), offline model, embedded storage:
a query with several tools including a frontend tool, submit, cancel of another run, replay, a signed download."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.local_server import local_server
from tests.support.sse import sse_events


@pytest.fixture(scope="module")
def browser() -> Iterator[httpx.Client]:
    with local_server() as (base, _process), httpx.Client(base_url=base, timeout=30) as client:
        client.headers["Authorization"] = "Bearer browser-user"
        yield client


def _run(client: httpx.Client, body: dict[str, Any], on_tool_end: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with client.stream("POST", "/api/ap/query", json=body) as response:
        assert response.status_code == 200, response.read()
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "tool.end":
                on_tool_end(event, events)
    return events


def test_query_with_tools_and_a_frontend_tool_then_cancel_replay_and_download(browser: httpx.Client) -> None:
    message = 'what time is it in Tokyo? ask me to pick "tea" or "coffee". save this as notes.txt: meet at 3pm'
    submits: list[dict[str, Any]] = []

    def answer(event: dict[str, Any], events: list[dict[str, Any]]) -> None:
        start = next(e for e in events if e.get("toolId") == event["toolId"] and e["type"] == "tool.start")
        if start["toolType"] == "frontend":
            body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "tea"}}
            submits.append(browser.post("/api/ap/submit", json=body).json())

    events = _run(browser, {"message": message}, answer)
    assert submits == [{"accepted": True, "status": "accepted"}]
    started = {e["toolName"]: e for e in events if e["type"] == "tool.start"}
    assert set(started) == {"ask_user", "save_file", "time"}
    results = {e["toolId"]: e for e in events if e["type"] == "tool.result"}
    assert all(r["status"] == "ok" for r in results.values())
    assert events[-1]["type"] == "run.complete"
    chat_id = events[0]["chatId"]

    # Another run, cancelled while it waits for the browser
    def cancel(event: dict[str, Any], _events: list[dict[str, Any]]) -> None:
        assert browser.post("/api/ap/cancel", json={"runId": event["runId"]}).json()["accepted"] is True

    cancelled = _run(browser, {"message": "ask me anything", "chatId": chat_id}, cancel)
    assert cancelled[-1]["type"] == "run.cancel"

    # Replay: both runs, oldest first, ending with their terminal events
    replay = browser.get("/api/ap/chat", params={"chatId": chat_id}).json()["events"]
    terminals = [e["type"] for e in replay if e["type"] in {"run.complete", "run.cancel"}]
    assert terminals == ["run.complete", "run.cancel"]

    # The saved file through its signed link: no identity needed, the token authorises it
    link = results[started["save_file"]["toolId"]]["result"]["url"]
    download = httpx.get(str(browser.base_url) + link + "&download=1", timeout=30)
    assert download.status_code == 200 and download.text == "meet at 3pm"
    assert download.headers["content-disposition"].startswith("attachment")
