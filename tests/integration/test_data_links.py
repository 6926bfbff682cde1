"""Data-file links keep working: the local server's key survives a restart, and every read of stored parts
(replay, message listings, a retried request) signs their links afresh. A refused link opened in a browser is a
small HTML page; API clients keep the JSON error."""

from __future__ import annotations

import json
import stat
import tempfile
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.api.routes.data import DataTokenRejected, refused_page
from agent_core.context import AppContext, build_context
from agent_core.store.link_key import KEY_FILE
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.data_links import LINK_TTL_S
from tests.support.fixtures import make_settings
from tests.support.local_server import local_server

SAVE = "save this as notes.txt: meet at 3pm"
HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}  # a browser's


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def _link(events: list[dict[str, Any]]) -> str:
    results = [e.get("result") for e in events if e["type"] == "tool.result"]
    [url] = [r["url"] for r in results if isinstance(r, dict) and "url" in r]
    assert isinstance(url, str) and "/api/ap/data?file=" in url
    return url


# ----- the local server: one key per data directory, kept across restarts -----


def test_a_link_signed_before_a_restart_of_the_local_server_still_opens() -> None:
    with tempfile.TemporaryDirectory(prefix="agent-core-") as data_dir:
        with local_server(AGENT_DATA_DIR=data_dir) as (base, _process):
            answer = httpx.post(f"{base}/api/ap/query", json={"message": SAVE}, timeout=60)
            link = _link(_events(answer.text))
            assert httpx.get(f"{base}{link}", headers={"X-User-Id": "mallory"}).text == "meet at 3pm"
        key = Path(data_dir) / KEY_FILE
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        first_key = key.read_bytes()
        # When the server restarts on the same data directory, the old link (the token is the grant) still opens
        with local_server(AGENT_DATA_DIR=data_dir) as (base, _process):
            opened = httpx.get(f"{base}{link}", headers={"X-User-Id": "mallory"})
        assert opened.status_code == 200 and opened.text == "meet at 3pm", opened.text
        assert key.read_bytes() == first_key


# ----- links are signed when read -----


class Clock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _context(clock: Clock) -> AppContext:
    ctx = build_context(make_settings(), table=MemoryTable(), audit=lambda line: None)
    ctx.deps.data_links.clock = clock  # the links' clock only: X-Agent-Now never reaches link expiry
    return ctx


def _client(ctx: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": user}, timeout=60
    )


async def test_replay_after_a_links_expiry_answers_a_fresh_working_link() -> None:
    clock = Clock()
    ctx = _context(clock)
    async with _client(ctx) as alice, _client(ctx, "mallory") as mallory:
        live = _events((await alice.post("/api/ap/query", json={"message": SAVE, "requestId": "r-1"})).text)
        stored = _link(live)
        chat_id = live[0]["chatId"]
        assert (await mallory.get(stored)).text == "meet at 3pm"
        # An hour and a minute later the stored link has expired
        clock.now += LINK_TTL_S + 60
        expired = await mallory.get(stored)
        assert expired.status_code == 403 and expired.json()["data"]["errorCode"] == "TOKEN_EXPIRED"
        # Replay (the reopened chat) answers a fresh link that works
        replay = (await alice.get("/api/ap/chat", params={"chatId": chat_id, "includeRawMessages": "true"})).json()
        fresh = _link(replay["events"])
        assert fresh != stored
        assert (await mallory.get(fresh)).text == "meet at 3pm"
        # ... in the raw messages too (the tool message stores its result as JSON text)
        [tool_message] = [m for m in replay["rawMessages"] if m["role"] == "tool"]
        assert (await mallory.get(json.loads(tool_message["content"])["url"])).status_code == 200
        # ... in the conversation API's message listing
        listing = (await alice.get(f"/api/v1/conversations/{chat_id}/messages")).json()["items"]
        [listed] = [m for m in listing if m["role"] == "TOOL"]
        assert (await mallory.get(json.loads(listed["content"])["url"])).status_code == 200
        # ... and in the answer's own text, which quotes the link
        answer = listing[-1]["content"]
        assert answer.startswith("[offline model]") and stored.split("&t=")[1] not in answer
        quoted = json.loads(answer.split("\n", 1)[1])["url"]
        assert (await mallory.get(quoted)).status_code == 200
        # ... and in a retried request's replay (same requestId)
        retried = _events((await alice.post("/api/ap/query", json={"message": SAVE, "requestId": "r-1"})).text)
        assert (await mallory.get(_link(retried))).text == "meet at 3pm"


async def test_an_expired_link_opened_in_a_browser_is_a_readable_page() -> None:
    clock = Clock()
    ctx = _context(clock)
    async with _client(ctx) as alice:
        link = _link(_events((await alice.post("/api/ap/query", json={"message": SAVE})).text))
        clock.now += LINK_TTL_S + 1
        page = await alice.get(link, headers=HTML)
        api = await alice.get(link, headers={"Accept": "application/json"})
        invalid = await alice.get(link[: -len("x")] + ("y" if not link.endswith("y") else "z"), headers=HTML)
    assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")
    assert "This link has expired" in page.text and "Reopen the chat" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert api.status_code == 403 and api.json()["error"]["code"] == "data_token_invalid"
    assert invalid.status_code == 403 and "This link is not valid" in invalid.text


def test_the_refused_page_escapes_what_it_shows() -> None:
    refused = DataTokenRejected("refused", data={"errorCode": "<b>TOKEN_EXPIRED</b>"})
    page = refused_page(refused, 'c_1/<script>alert("x")</script>').body.decode()
    assert "<script>" not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<b>" not in page


async def test_a_retried_blocking_turn_answers_its_stored_result_with_fresh_links() -> None:
    clock = Clock()
    ctx = _context(clock)
    async with _client(ctx) as alice:
        chat_id = (await alice.post("/api/v1/conversations", json={"title": "notes"})).json()["conversationId"]
        body = {"message": SAVE, "requestId": "blocking-1"}
        first = (await alice.post(f"/api/v1/conversations/{chat_id}/chat", json=body)).json()
        clock.now += LINK_TTL_S + 60
        retry = (await alice.post(f"/api/v1/conversations/{chat_id}/chat", json=body)).json()
    # The answer quotes the link (the offline model quotes its tool results)
    stale, fresh = (json.loads(r["assistantMessage"].split("\n", 1)[1])["url"] for r in (first, retry))
    assert fresh != stale
    async with _client(ctx, "mallory") as mallory:
        assert (await mallory.get(stale)).status_code == 403
        assert (await mallory.get(fresh)).text == "meet at 3pm"


async def test_a_stored_response_and_its_conversation_items_answer_fresh_links() -> None:
    clock = Clock()
    ctx = _context(clock)
    async with _client(ctx) as alice:
        created = (await alice.post("/v1/responses", json={"model": "main-agent", "input": SAVE})).json()
        clock.now += LINK_TTL_S + 60
        retrieved = await alice.get(f"/v1/responses/{created['id']}")
        items = await alice.get(f"/v1/conversations/{created['conversation']['id']}/items")
    [stale] = _links_in(created)
    assert (await _fetch(ctx, stale)).status_code == 403
    for answer in (retrieved, items):
        fresh = _links_in(answer.json())
        assert fresh and stale not in fresh
        for link in fresh:
            assert (await _fetch(ctx, link)).text == "meet at 3pm"


def _links_in(value: Any) -> set[str]:
    import re

    return set(re.findall(r"/api/ap/data\?file=[^&\"\\\\]+&t=[A-Za-z0-9_.-]+", json.dumps(value)))


async def _fetch(ctx: AppContext, link: str) -> httpx.Response:
    async with _client(ctx, "mallory") as mallory:
        return await mallory.get(link)
