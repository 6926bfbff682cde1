"""The run lease while a run lives: renewed by a heartbeat, released on every way out.

The heartbeat test holds the run on a frontend tool and drives the lease's clock and its heartbeat from the
test: each beat happens when the test lets it, and the clock passes the lease taken at the start only after
the test has seen the renewal. Nothing waits on the wall clock.
"""

from __future__ import annotations

import asyncio
import queue
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.ids import now_ms
from agent_core.llm.base import LlmRequest
from agent_core.runtime import scope as run_scope
from agent_core.runtime import turn as run_turn
from agent_core.runtime.cancel import CancelWatch
from agent_core.runtime.lease import LeaseKeeper
from agent_core.store.base import TurnStore
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.server import serve
from tests.support.sse import sse_events

HEARTBEAT_MS = 600
WAKE_TIMEOUT_S = 30  # a bound on waiting for the server's thread, never a timing assertion


class DrivenHeartbeat:
    """The lease's clock and its heartbeat, driven by the test (the server runs on a thread of its own).

    The runner's LeaseKeeper gets this clock and `sleep`: each sleep it enters is queued for the test, and
    returns when the test calls `beat()`, which first moves the clock on by the sleep's length."""

    def __init__(self) -> None:
        self.now = now_ms()
        self._asleep: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Event, float]] = queue.Queue()
        self._pending: tuple[asyncio.AbstractEventLoop, asyncio.Event, float] | None = None

    def clock(self) -> int:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.Event()
        self._asleep.put((asyncio.get_running_loop(), wake, seconds))
        await wake.wait()

    def keeper(
        self, store: TurnStore, chat_id: str, run_id: str, heartbeat_ms: int, lease_ms: int, clock: Any, **kw: Any
    ) -> LeaseKeeper:
        return LeaseKeeper(store, chat_id, run_id, heartbeat_ms, lease_ms, self.clock, self.sleep, **kw)

    def wait_asleep(self) -> float:
        """Block until the keeper sleeps towards its next beat (it has started, or its last renewal is done)."""
        self._pending = self._asleep.get(timeout=WAKE_TIMEOUT_S)
        return self._pending[2]

    def beat(self) -> None:
        """Let one heartbeat interval pass: the clock moves on by it, the keeper wakes and renews."""
        assert self._pending is not None
        loop, wake, seconds = self._pending
        self._pending = None
        self.now += round(seconds * 1000)
        loop.call_soon_threadsafe(wake.set)


def _lease_expires_at(context: AppContext, chat_id: str) -> int:
    chat = asyncio.run(context.deps.chats.get_chat(chat_id, "alice"))
    assert chat is not None and chat.lease_expires_at is not None
    return chat.lease_expires_at


@pytest.mark.parametrize("agent_now", [None, "2026-01-08T03:00:00+00:00"], ids=["now", "overridden-now"])
def test_the_lease_is_renewed_while_a_frontend_tool_waits_past_it(
    agent_now: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With X-Agent-Now in the past too: the lease and its renewals run on the wall clock all the same
    settings = make_settings(
        AGENT_RUN_HEARTBEAT_MS=str(HEARTBEAT_MS), AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true"
    )
    lease_ms = settings.run_lease_ms
    heartbeat = DrivenHeartbeat()
    monkeypatch.setattr(run_turn, "now_ms", heartbeat.clock)  # where a turn takes the lease
    monkeypatch.setattr(run_scope, "LeaseKeeper", heartbeat.keeper)  # where a run renews it (its scope)
    context = build_context(settings, table=MemoryTable(), audit=lambda line: None)
    headers = {"X-User-Id": "alice"} | ({"X-Agent-Now": agent_now} if agent_now else {})
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers=headers, timeout=30) as client,
    ):
        chat_id = client.post("/api/v1/conversations", json={}).json()["conversationId"]
        during: list[int] = []
        events: list[dict[str, Any]] = []
        ask = {"message": 'ask me to pick "red" or "blue"', "chatId": chat_id}
        with client.stream("POST", "/api/ap/query", json=ask) as response:
            for event in sse_events(response):
                events.append(event)
                if event["type"] != "tool.end":
                    continue
                # Given the run waits for the browser, holding the lease it took at the start
                assert heartbeat.wait_asleep() == HEARTBEAT_MS / 1000
                first = _lease_expires_at(context, chat_id)
                assert first == heartbeat.now + lease_ms
                # When one heartbeat passes, the lease is renewed from that beat
                heartbeat.beat()
                heartbeat.wait_asleep()
                assert _lease_expires_at(context, chat_id) == heartbeat.now + lease_ms > first
                # Then, once the clock is past the first lease, a second query on the chat is still refused
                heartbeat.now = first + 1
                during.append(client.post("/api/ap/query", json={"message": "me too", "chatId": chat_id}).status_code)
                body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "red"}}
                assert client.post("/api/ap/submit", json=body).json()["accepted"] is True
        assert during == [409]
        assert events[-1]["type"] == "run.complete"
        # And the moment the run ended, the chat takes the next query
        with client.stream("POST", "/api/ap/query", json={"message": "next", "chatId": chat_id}) as after:
            assert after.status_code == 200
            assert list(sse_events(after))[-1]["type"] == "run.complete"


async def test_the_lease_is_released_when_the_history_read_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a turn that took the lease and then fails reading its history
    context = build_context(make_settings(), table=MemoryTable(), llm=ScriptedLlm(), audit=lambda line: None)
    app = build_app(*routes.chat, context=context)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    client = httpx.AsyncClient(transport=transport, base_url="http://t", headers={"X-User-Id": "alice"})
    async with client:
        chat_id = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        chats = context.deps.chats
        original = chats.recent_messages

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("history unavailable")

        monkeypatch.setattr(chats, "recent_messages", broken)
        failed = await client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "hi"})
        assert failed.status_code == 500
        # Then the run is recorded failed and the lease is free: the next turn runs at once
        monkeypatch.setattr(chats, "recent_messages", original)
        chat = await chats.get_chat(chat_id, "alice")
        assert chat is not None and chat.active_run_id is None
        runs, _ = await context.deps.turns.list_runs(chat_id, 10, None)
        assert [(r.status.value, r.error_code) for r in runs] == [("failed", "internal_error")]
        ok = await client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "again"})
        assert ok.status_code == 200


class FlakyRunReads:
    """A store whose RUN reads fail twice, then report a cancel request."""

    def __init__(self) -> None:
        self.reads = 0

    async def is_cancel_requested(self, chat_id: str, run_id: str) -> bool:
        self.reads += 1
        if self.reads <= 2:
            raise ConnectionError("read failed")
        return True


async def test_the_cancel_watch_survives_failed_reads() -> None:
    store = FlakyRunReads()
    watch = CancelWatch(store, "c", "r", asyncio.Event(), poll_s=0.01, max_poll_s=0.02)  # type: ignore[arg-type]
    watch.start()
    await asyncio.wait_for(watch.event.wait(), timeout=10)
    await watch.stop()
    assert watch.failed_reads == 2 and store.reads == 3


async def test_the_model_is_offered_only_tools_governance_can_allow() -> None:
    llm = ScriptedLlm(Reply(text="done"))
    settings = make_settings(AGENT_TOOLS_ALLOWED="time,http_get,save_file", AGENT_PERMISSIONS_GRANTED="net:http")
    context = build_context(settings, table=MemoryTable(), llm=llm, audit=lambda line: None)
    app = build_app(*routes.chat, context=context)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": "alice"}
    ) as client:
        chat_id = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        assert (await client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "hi"})).status_code == 200
    request: LlmRequest = llm.requests[0]
    # save_file needs data:write (not granted); ask_user and the memory tools are not allowed
    assert sorted(t["function"]["name"] for t in request.tools) == ["http_get", "time"]
