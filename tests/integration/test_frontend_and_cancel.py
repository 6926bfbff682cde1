"""Frontend tools with submit, cancel, and replay equal to live, over real HTTP."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.runtime import recorder as run_recorder
from agent_core.runtime.finish import persist_run
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import query, sse_events
from tests.support.wait import poll_until


def _offline_context(**settings: Any) -> AppContext:
    return build_context(make_settings(**settings), table=MemoryTable(), audit=lambda line: None)


@pytest.fixture
def offline() -> Iterator[httpx.Client]:
    with (
        serve(build_app(*routes.local, context=_offline_context())) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as c,
    ):
        yield c


def _ask_and_answer(client: httpx.Client, answer: dict[str, Any], submitter: httpx.Client | None = None) -> Any:
    """Query the ask_user round trip; submit `answer` when the call's tool.end arrives."""
    submits: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    with client.stream("POST", "/api/ap/query", json={"message": 'ask me to pick "red" or "blue"'}) as response:
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "tool.end":
                body = {"runId": event["runId"], "toolId": event["toolId"], "params": answer}
                submits.append((submitter or client).post("/api/ap/submit", json=body).json())
    return events, submits


def test_frontend_tool_round_trip_with_submit(offline: httpx.Client) -> None:
    # When the browser submits on tool.end
    events, submits = _ask_and_answer(offline, {"choice": "blue"})
    # Then the submit matched, the run emitted request.submit, and the params are the tool result
    assert submits == [{"accepted": True, "status": "accepted"}]
    start = next(e for e in events if e["type"] == "tool.start")
    assert (start["toolName"], start["toolType"]) == ("ask_user", "frontend")
    args = "".join(e["delta"] for e in events if e["type"] == "tool.args")
    assert '"choices": ["red", "blue"]' in args
    kinds = [e["type"] for e in events]
    assert kinds.index("tool.end") < kinds.index("request.submit") < kinds.index("tool.result")
    submitted = next(e for e in events if e["type"] == "request.submit")
    result = next(e for e in events if e["type"] == "tool.result")
    assert submitted["params"] == result["result"] == {"choice": "blue"} and result["status"] == "ok"
    assert events[-1]["type"] == "run.complete"
    # A repeated submit for the same call is refused with the run's status
    again = {"runId": start["runId"], "toolId": start["toolId"], "params": {"choice": "red"}}
    assert offline.post("/api/ap/submit", json=again).json() == {"accepted": False, "status": "completed"}


def test_a_submit_after_the_run_was_cancelled_is_refused_with_the_runs_status(
    offline: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run waiting for the browser's answer, cancelled on the call's tool.end, whose end is stored only
    # once the test lets it (the server runs on its own thread: the gate is a thread event)
    let_it_end = threading.Event()

    async def persist_when_let(*args: Any, **kwargs: Any) -> Any:
        assert await asyncio.to_thread(let_it_end.wait, 30), "the test never let the run end"
        return await persist_run(*args, **kwargs)

    monkeypatch.setattr(run_recorder, "persist_run", persist_when_let)
    answers: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    with offline.stream("POST", "/api/ap/query", json={"message": 'ask me to pick "red" or "blue"'}) as response:
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "tool.end":
                body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "red"}}
                assert offline.post("/api/ap/cancel", json={"runId": event["runId"]}).json()["accepted"] is True
                # When the browser submits after the cancel, before the run's end is stored
                answers.append(offline.post("/api/ap/submit", json=body).json())
                let_it_end.set()
    # Then it is refused (the run is being cancelled), the run ends cancelled, and a later submit says so
    assert answers == [{"accepted": False, "status": "cancelling"}]
    assert events[-1]["type"] == "run.cancel" and "request.submit" not in [e["type"] for e in events]
    assert offline.post("/api/ap/submit", json=body).json() == {"accepted": False, "status": "cancelled"}


def test_a_run_whose_client_went_away_waits_for_the_submit_and_resumes(offline: httpx.Client) -> None:
    # Given a run waiting for the browser's answer whose client went away on the call's tool.end
    body: dict[str, Any] = {}
    received: list[dict[str, Any]] = []
    with offline.stream("POST", "/api/ap/query", json={"message": 'ask me to pick "red" or "blue"'}) as response:
        for event in sse_events(response):
            received.append(event)
            if event["type"] == "tool.end":
                body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "red"}}
                break
    # When the browser submits (the run did not end with its client: it still waits)
    assert offline.post("/api/ap/submit", json=body).json() == {"accepted": True, "status": "accepted"}
    # Then the stream resumed after the last event received continues with the submit, to the run's end
    after = received[-1]["seq"]
    with offline.stream("GET", f"/api/ap/runs/{body['runId']}/events", headers={"Last-Event-ID": str(after)}) as rest:
        resumed = list(sse_events(rest))
    assert [e["seq"] for e in resumed] == list(range(after + 1, after + 1 + len(resumed)))
    kinds = [e["type"] for e in resumed]
    assert kinds[0] == "request.submit" and kinds[-1] == "run.complete", kinds
    assert next(e for e in resumed if e["type"] == "tool.result")["result"] == {"choice": "red"}
    # And a later submit is refused with the run's status
    assert offline.post("/api/ap/submit", json=body).json() == {"accepted": False, "status": "completed"}


async def test_a_cancel_closes_the_runs_waiting_frontend_calls(any_table: Any) -> None:
    # Given a running run with two waiting frontend calls, one already answered
    from agent_core.domain.models import Wait, WaitStatus
    from agent_core.store.table_store import TableStore

    context = build_context(make_settings(), table=any_table, audit=lambda line: None)
    store = context.deps.turns
    assert isinstance(store, TableStore)
    pending = await _running_run(context)
    for tool_id in ("t1", "t2"):
        await store.create_wait(Wait(run_id=pending.run_id, tool_id=tool_id, user_id="alice", expires_at=2**40))
    assert await store.submit_wait(pending.run_id, "t2", "alice", {"ok": True}, 0)
    # When the run is cancelled
    assert await store.request_cancel(pending.chat_id, pending.run_id)
    # Then the waiting call no longer accepts a submit (the WAIT condition), the answered one is kept
    first, second = await store.get_wait(pending.run_id, "t1"), await store.get_wait(pending.run_id, "t2")
    assert first is not None and first.status == WaitStatus.CANCELLED
    assert second is not None and second.status == WaitStatus.SUBMITTED
    assert not await store.submit_wait(pending.run_id, "t1", "alice", {"late": True}, 0)


async def _running_run(context: AppContext) -> Any:
    """A turn that took its chat's lease (prepared, not run): its Run is `running`."""
    from agent_core.runtime.turn import TurnRequest, prepare_turn

    prepared = await prepare_turn(context.deps, TurnRequest(user_id="alice", message="hello"))
    return prepared.run  # type: ignore[union-attr]


def test_submit_by_another_user_or_for_unknown_ids_is_unmatched(offline: httpx.Client) -> None:
    bob = httpx.Client(base_url=str(offline.base_url), headers={"X-User-Id": "bob"}, timeout=30)
    with bob:
        # bob's submit does not match alice's wait; alice's own submit then does
        events: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        with offline.stream("POST", "/api/ap/query", json={"message": "ask me something"}) as response:
            for event in sse_events(response):
                events.append(event)
                if event["type"] == "tool.end":
                    body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"a": 1}}
                    results.append(bob.post("/api/ap/submit", json=body).json())
                    results.append(offline.post("/api/ap/submit", json=body).json())
        assert results == [{"accepted": False, "status": "unmatched"}, {"accepted": True, "status": "accepted"}]
    unknown = offline.post("/api/ap/submit", json={"runId": "nope", "toolId": "x", "params": {}})
    assert unknown.json() == {"accepted": False, "status": "unmatched"}
    malformed = offline.post("/api/ap/submit", json={"runId": "r", "params": []})
    assert malformed.status_code == 422


def test_frontend_timeout_gives_empty_result_with_status_timeout() -> None:
    context = _offline_context(AGENT_FRONTEND_SUBMIT_TIMEOUT_MS="200")
    with serve(build_app(*routes.local, context=context)) as base, httpx.Client(base_url=base, timeout=30) as c:
        events = query(c, {"message": "ask me anything"})
    result = next(e for e in events if e["type"] == "tool.result")
    assert (result["status"], result["reason"], result["result"]) == ("timeout", "timeout", {})
    assert "request.submit" not in [e["type"] for e in events]
    assert events[-1]["type"] == "run.complete"


def test_submit_through_a_second_app_instance_sharing_one_moto_table(moto_table: DynamoTable) -> None:
    # Given two app instances (two Lambda environments) on one DynamoDB table
    first = build_context(make_settings(AGENT_STORAGE="aws"), table=moto_table, audit=lambda line: None)
    second = build_context(make_settings(AGENT_STORAGE="aws"), table=moto_table, audit=lambda line: None)
    app_a = build_app(*routes.local, context=first)
    app_b = build_app(*routes.submit_routes, context=second)
    with (
        serve(app_a) as a,
        serve(app_b) as b,
        httpx.Client(base_url=a, timeout=30) as client,
        httpx.Client(base_url=b, timeout=30) as other,
    ):
        events, submits = _ask_and_answer(client, {"ok": True}, submitter=other)
    assert submits == [{"accepted": True, "status": "accepted"}]
    assert next(e for e in events if e["type"] == "tool.result")["result"] == {"ok": True}


@pytest.fixture
def stub_client(openai_stub: OpenAiStub) -> Iterator[httpx.Client]:
    settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="sk-t")
    context = build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda line: None)
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as c,
    ):
        yield c


def test_cancel_stops_the_run_and_run_cancel_is_last(stub_client: httpx.Client, openai_stub: OpenAiStub) -> None:
    # Given a model that stalls after its first delta until the test lets it go
    release = threading.Event()
    script = StubScript.text(*[f"t{i} " for i in range(10)])
    script.before_chunk = lambda seq: release.wait(timeout=10) if seq == 2 else None
    openai_stub.enqueue(script)
    events: list[dict[str, Any]] = []
    with stub_client.stream("POST", "/api/ap/query", json={"message": "long answer"}) as response:
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "content.delta" and event["delta"] == "t0 ":
                run_id = event["runId"]
                # A foreign caller cannot cancel it; the owner can
                foreign = stub_client.post("/api/ap/cancel", json={"runId": run_id}, headers={"X-User-Id": "bob"})
                assert foreign.status_code == 404
                ok = stub_client.post("/api/ap/cancel", json={"runId": run_id})
                assert ok.json() == {"accepted": True, "runId": run_id, "status": "cancelling"}
    release.set()
    assert events[-1]["type"] == "run.cancel" and events[-1]["reason"] == "cancel_requested"
    deltas = [e["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == ["t0 ", "t1 "][: len(deltas)], "nothing after the cancel"
    assert len(openai_stub.requests) == 1, "no further model request after the cancel"
    # The run is over: cancelling again is not running; the chat takes the next query
    again = stub_client.post("/api/ap/cancel", json={"runId": events[0]["runId"]}).json()
    assert again["accepted"] is False and again["status"] == "not_running"
    follow = query(stub_client, {"message": "next", "chatId": events[0]["chatId"]})
    assert follow[-1]["type"] == "run.complete"
    replay = stub_client.get("/api/ap/chat", params={"chatId": events[0]["chatId"]}).json()["events"]
    assert [e["type"] for e in replay if e["runId"] == events[0]["runId"]][-1] == "run.cancel"


def test_replay_equals_live(stub_client: httpx.Client, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "UTC"}}], piece_size=4),
        StubScript.text("It is ", "now."),
    )
    live = query(stub_client, {"message": "time?"})
    chat_id = live[0]["chatId"]
    body = stub_client.get("/api/ap/chat", params={"chatId": chat_id}).json()
    replay = body["events"]
    assert body["chatId"] == chat_id and body["chatName"] == "time?" and "rawMessages" not in body
    by_type = {e["type"]: e for e in replay}
    # Same text, same tool args, same results, same terminal event
    assert by_type["content.snapshot"]["text"] == "".join(e["delta"] for e in live if e["type"] == "content.delta")
    assert by_type["tool.snapshot"]["args"] == "".join(e["delta"] for e in live if e["type"] == "tool.args")
    assert by_type["tool.snapshot"]["toolName"] == "time" and by_type["tool.snapshot"]["toolType"] == "backend"
    for kind in ("request.query", "run.route", "tool.result", "run.complete"):
        assert by_type[kind] == next(e for e in live if e["type"] == kind)
    # A snapshot carries the seq of the last live event it stands for
    assert by_type["tool.snapshot"]["seq"] == next(e["seq"] for e in live if e["type"] == "tool.end")
    assert by_type["content.snapshot"]["seq"] == next(e["seq"] for e in live if e["type"] == "content.end")
    assert [e["seq"] for e in replay] == sorted(e["seq"] for e in replay)
    raw = stub_client.get("/api/ap/chat", params={"chatId": chat_id, "includeRawMessages": "true"}).json()
    assert [m["role"] for m in raw["rawMessages"]] == ["user", "assistant", "tool", "assistant"]
    assert raw["rawMessages"][1]["tool_calls"][0]["id"] == "call_t"
    chats = stub_client.get("/api/ap/chats").json()["items"]
    assert chats[0]["chatId"] == chat_id and chats[0]["chatName"] == "time?"
    assert stub_client.get("/api/ap/chat", params={"chatId": chat_id}, headers={"X-User-Id": "bob"}).status_code == 404


def test_a_client_disconnect_does_not_cancel_the_run(stub_client: httpx.Client, openai_stub: OpenAiStub) -> None:
    # Given a model that stalls after its first delta
    release = threading.Event()
    script = StubScript.text(*[f"d{i} " for i in range(6)])
    script.before_chunk = lambda seq: release.wait(timeout=10) if seq == 2 else None
    openai_stub.enqueue(script)
    chat_id = ""
    # When the client reads the first delta and goes away
    with stub_client.stream("POST", "/api/ap/query", json={"message": "then hang up"}) as response:
        for event in sse_events(response):
            chat_id = chat_id or event.get("chatId", "")
            if event["type"] == "content.delta":
                break
    release.set()

    # Then the run goes on to its end (cancelling is explicit): the whole answer is stored
    def ended() -> list[dict[str, Any]]:
        replay = stub_client.get("/api/ap/chat", params={"chatId": chat_id}).json()["events"]
        return replay if any(e["type"] in ("run.cancel", "run.error", "run.complete") for e in replay) else []

    replay = poll_until(ended, "the disconnected run was stored", interval_s=0.05)
    terminal = next(e for e in replay if e["type"] in ("run.cancel", "run.error", "run.complete"))
    assert terminal["type"] == "run.complete", terminal
    snapshot = next(e for e in replay if e["type"] == "content.snapshot")
    assert snapshot["text"] == "".join(f"d{i} " for i in range(6))
