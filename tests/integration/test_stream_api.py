"""POST /api/ap/query over real HTTP (uvicorn on loopback) with the real openai SDK against the stub."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import query, sse_events


@pytest.fixture
def context(openai_stub: OpenAiStub) -> AppContext:
    settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="sk-t")
    return build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda line: None)


@pytest.fixture
def client(context: AppContext) -> Iterator[httpx.Client]:
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as c,
    ):
        yield c


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_event_grammar_for_two_interleaved_tool_calls(client: httpx.Client, openai_stub: OpenAiStub) -> None:
    # Given a model that interleaves the argument chunks of two calls, then answers in two deltas
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_a", "name": "time", "arguments": {"timezone": "Asia/Shanghai"}},
                {"id": "call_b", "name": "time", "arguments": {"timezone": "Europe/Paris"}},
            ],
            piece_size=6,
            interleave=True,
        ),
        StubScript.text("Both ", "times ", "shown."),
    )
    # When a new chat is queried
    events = query(client, {"message": "时间对比", "requestId": "req-1"})
    # Then the envelope: consecutive seq from 1, ids on the right events
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    run_id = events[0]["runId"]
    assert all(e["runId"] == run_id and isinstance(e["timestamp"], int) for e in events)
    assert _types(events)[:4] == ["request.query", "chat.start", "run.start", "run.route"]
    assert events[1]["chatName"] == "时间对比"
    for e in events:
        has_ids = e["type"] in {"request.query", "chat.start", "run.start", "run.complete"}
        assert ("chatId" in e and e["requestId"] == "req-1") == has_ids, e
    # Each call has its own boundaries; args arrive live, interleaved, with chunkIndex 0, 1, 2 ... per tool
    for tool_id, zone in (("call_a", "Asia/Shanghai"), ("call_b", "Europe/Paris")):
        mine = [e for e in events if e.get("toolId") == tool_id]
        kinds = [e["type"] for e in mine]
        assert kinds[0] == "tool.start" and kinds[-2:] == ["tool.end", "tool.result"]
        args = [e for e in mine if e["type"] == "tool.args"]
        assert [a["chunkIndex"] for a in args] == list(range(len(args)))
        assert "".join(a["delta"] for a in args) == f'{{"timezone": "{zone}"}}'
        assert mine[0]["toolName"] == "time" and mine[0]["toolType"] == "backend"
        assert mine[-1]["status"] == "ok" and mine[-1]["result"]["timezone"] == zone
    arg_owners = [e["toolId"] for e in events if e["type"] == "tool.args"]
    assert arg_owners[:2] == ["call_a", "call_b"], "interleaved as the model sent them"
    # One content.delta per upstream delta, never merged; the run completes last
    assert [e["delta"] for e in events if e["type"] == "content.delta"] == ["Both ", "times ", "shown."]
    assert events[-1]["type"] == "run.complete" and events[-1]["finishReason"] == "stop"
    assert events[-1]["usage"] == {"promptTokens": 31, "completionTokens": 16}
    # chat.start only on the chat's first query
    again = query(client, {"message": "again", "chatId": events[0]["chatId"]})
    assert "chat.start" not in _types(again)


def test_no_buffering_each_delta_reaches_the_client_before_the_next_is_sent(
    client: httpx.Client, openai_stub: OpenAiStub
) -> None:
    # Given a stub that sends delta n+1 only after the client has read delta n (a buffering server deadlocks)
    pieces = [f"w{i} " for i in range(25)]
    received = [threading.Event() for _ in pieces]
    stalled: list[int] = []

    def lockstep(n: int) -> None:
        if not received[n - 1].wait(timeout=10):
            stalled.append(n)

    script = StubScript.text(*pieces)
    script.before_chunk = lambda seq: lockstep(seq) if 1 <= seq <= len(pieces) - 1 else None
    openai_stub.enqueue(script)
    got: list[str] = []
    with client.stream("POST", "/api/ap/query", json={"message": "stream please"}) as response:
        for event in sse_events(response):
            if event["type"] == "content.delta":
                received[len(got)].set()
                got.append(event["delta"])
    assert stalled == [] and got == pieces


def test_errors_come_before_any_stream(client: httpx.Client, openai_stub: OpenAiStub) -> None:
    chat_id = query(client, {"message": "first"})[0]["chatId"]
    foreign = client.post("/api/ap/query", json={"message": "x", "chatId": chat_id}, headers={"X-User-Id": "bob"})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "conversation_not_found"
    assert client.post("/api/ap/query", json={"message": "  "}).status_code == 422
    assert client.post("/api/ap/query", json={"chatId": chat_id}).status_code == 422
    assert client.post("/api/ap/query", json={"message": "x", "agentKey": "nope"}).status_code == 404


def test_busy_chat_is_409_before_the_stream(client: httpx.Client, openai_stub: OpenAiStub) -> None:
    chat_id = query(client, {"message": "first"})[0]["chatId"]
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("slow ", "answer", gate=gate))
    with client.stream("POST", "/api/ap/query", json={"message": "one", "chatId": chat_id}) as response:
        events = sse_events(response)
        assert next(events)["type"] == "request.query"
        busy = client.post("/api/ap/query", json={"message": "two", "chatId": chat_id})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "run_in_progress"
        gate.set()
        assert [e["type"] for e in events][-1] == "run.complete"


def test_llm_failure_mid_stream_ends_with_run_error_and_replay_keeps_the_partial_content(
    client: httpx.Client, openai_stub: OpenAiStub
) -> None:
    script = StubScript.text("partial ", "answer ", "never")
    script.abort_after = 3  # role chunk, "partial ", "answer ", then the connection drops
    openai_stub.enqueue(script)
    events = query(client, {"message": "fail please"})
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "llm_unavailable"
    chat_id = events[0]["chatId"]
    replay = client.get("/api/ap/chat", params={"chatId": chat_id}).json()["events"]
    snapshot = next(e for e in replay if e["type"] == "content.snapshot")
    live = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    assert snapshot["text"] == live and live.startswith("partial")
    messages = client.get(f"/api/v1/conversations/{chat_id}/messages").json()["items"]
    assert [m["role"] for m in messages] == ["USER"], "no half-written assistant message in the history"


def test_a_retried_request_replays_the_stored_run_without_running_again(
    client: httpx.Client, openai_stub: OpenAiStub
) -> None:
    openai_stub.enqueue(StubScript.text("once ", "only"))
    first = query(client, {"message": "hello", "requestId": "same-1"})
    chat_id = first[0]["chatId"]
    openai_stub.enqueue(StubScript.text("once ", "only"))
    query(client, {"message": "hello", "chatId": chat_id, "requestId": "same-2"})
    calls = len(openai_stub.requests)
    again = query(client, {"message": "hello", "chatId": chat_id, "requestId": "same-2"})
    assert len(openai_stub.requests) == calls, "no model call for a retry"
    assert again[-1]["type"] == "run.complete" and again[-1]["requestId"] == "same-2"
    assert next(e for e in again if e["type"] == "content.snapshot")["text"] == "once only"
