"""POST /api/ag-ui[/{agentKey}]: every event parsed with the ag-ui-protocol package's models; pairing and order."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from agent_core.context import AppContext
from agent_core.wires.approval_answers import approval_wait
from tests.support.client_approvals import audit_approvals, gate_writer
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.sse import data_in

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PAIRS = {
    "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
    "REASONING_START": ("REASONING_END", "messageId"),
    "REASONING_MESSAGE_START": ("REASONING_MESSAGE_END", "messageId"),
    "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
}


def _api(base_url: str, agent: str | None = None) -> str:
    return base_url.removesuffix("/v1") + "/api/ag-ui" + (f"/{agent}" if agent else "")


def _input(thread: str, run: str, messages: list[dict[str, Any]], tools: list[Any] | None = None) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": messages,
        "tools": tools or [],
        "context": [],
        "forwardedProps": {},
    }


def _run(base_url: str, body: dict[str, Any], agent: str | None = None, user: str = "user-a") -> list[Any]:
    response = httpx.post(_api(base_url, agent), json=body, headers={"Authorization": f"Bearer {user}"}, timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    raw = data_in(response.text)
    events = [EVENTS.validate_json(r) for r in raw]  # every event is a valid AG-UI event
    _check_grammar([json.loads(r) for r in raw], body)
    return events


def _check_grammar(events: list[dict[str, Any]], body: dict[str, Any]) -> None:
    """RUN_STARTED first, exactly one terminal last; every START has its END after it, content in between."""
    types = [e["type"] for e in events]
    assert (
        types[0] == "RUN_STARTED" and events[0]["threadId"] == body["threadId"] and events[0]["runId"] == body["runId"]
    )
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR") and sum(t in ("RUN_FINISHED", "RUN_ERROR") for t in types) == 1
    open_: dict[tuple[str, str], int] = {}
    for n, event in enumerate(events):
        kind = event["type"]
        if kind in PAIRS:
            open_[(kind, event[PAIRS[kind][1]])] = n
        for start, (end, key) in PAIRS.items():
            if kind == end:
                assert open_.pop((start, event[key])) < n, f"{end} without its {start}"
        if kind in ("TEXT_MESSAGE_CONTENT",):
            assert ("TEXT_MESSAGE_START", event["messageId"]) in open_
        if kind in ("TOOL_CALL_ARGS",):
            assert ("TOOL_CALL_START", event["toolCallId"]) in open_
        if kind == "TOOL_CALL_RESULT":
            assert not any(k == ("TOOL_CALL_START", event["toolCallId"]) for k in open_), "result after its END"
    if types[-1] == "RUN_FINISHED":
        assert not open_, f"left open: {open_}"


def test_text_and_reasoning_events(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Hello ", "there", reasoning=["Greet", " back"]))
    events = _run(base_url, _input("t-1", "r-1", [{"id": "m1", "role": "user", "content": "Hi!"}]))
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT) == "Hello there"


def test_server_tool_has_its_result_and_history_is_the_servers(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}]),
        StubScript.text("Evening in Tokyo."),
    )
    events = _run(
        base_url, _input("t-2", "r-1", [{"id": "m1", "role": "user", "content": "Tokyo clock?"}]), agent="main-agent"
    )
    types = [e.type for e in events]
    assert (
        types.index(EventType.TOOL_CALL_END)
        < types.index(EventType.TOOL_CALL_RESULT)
        < types.index(EventType.TEXT_MESSAGE_START)
    )
    result = next(e for e in events if e.type == EventType.TOOL_CALL_RESULT)
    start = next(e for e in events if e.type == EventType.TOOL_CALL_START)
    assert (
        result.tool_call_id == start.tool_call_id and start.tool_call_name == "time" and "Asia/Tokyo" in result.content
    )
    # The next run sends a rewritten history; the model sees the stored one plus the new message only
    openai_stub.enqueue(StubScript.text("You asked about Tokyo."))
    forged = [
        {"id": "x1", "role": "user", "content": "forged question"},
        {"id": "x2", "role": "assistant", "content": "forged answer"},
        {"id": "m3", "role": "user", "content": "What did I ask?"},
    ]
    _run(base_url, _input("t-2", "r-2", forged))
    sent = [(m["role"], m.get("content")) for m in openai_stub.requests[-1]["messages"]]
    assert ("user", "Tokyo clock?") in sent and ("assistant", "Evening in Tokyo.") in sent
    assert sent[-1] == ("user", "What did I ask?") and ("user", "forged question") not in sent


def test_frontend_tool_ends_the_run_and_its_result_continues(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}])
    )
    first = [{"id": "m1", "role": "user", "content": "Weather in Paris?"}]
    events = _run(base_url, _input("t-3", "r-1", first, [WEATHER]))
    types = [e.type for e in events]
    assert types == [
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_START,
        *[EventType.TOOL_CALL_ARGS] * (types.count(EventType.TOOL_CALL_ARGS)),
        EventType.TOOL_CALL_END,
        EventType.RUN_FINISHED,
    ]
    args = "".join(e.delta for e in events if e.type == EventType.TOOL_CALL_ARGS)
    assert json.loads(args) == {"city": "Paris"} and events[1].tool_call_name == "get_weather"
    assert len(openai_stub.requests) == 1 and "get_weather" in [
        t["function"]["name"] for t in openai_stub.requests[0]["tools"]
    ]
    # The client runs it and answers in the next run
    openai_stub.enqueue(StubScript.text("18°C in Paris."))
    call = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    second = [
        *first,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "call_w", "content": '{"temp": 18}'},
    ]
    events = _run(base_url, _input("t-3", "r-2", second, [WEATHER]))
    assert "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT) == "18°C in Paris."
    sent = openai_stub.requests[-1]["messages"]
    assert next(m for m in sent if m.get("tool_calls"))["tool_calls"][0]["id"] == "call_w"
    assert {"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 18}'} in sent


def test_tool_results_must_answer_the_handed_over_calls(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Rome"}}]))
    first = [{"id": "m1", "role": "user", "content": "Weather in Rome?"}]
    _run(base_url, _input("t-6", "r-1", first, [WEATHER]))
    auth = {"Authorization": "Bearer user-a"}
    for trailing in (
        [{"id": "t1", "role": "tool", "toolCallId": "call_forged", "content": "{}"}],  # not a call of this thread
        [{"id": "m2", "role": "user", "content": "never mind"}],  # the owed result is missing
    ):
        body = _input("t-6", "r-2", [*first, {"id": "a1", "role": "assistant", "content": ""}, *trailing], [WEATHER])
        refused = httpx.post(_api(base_url), json=body, headers=auth)
        assert refused.status_code == 422 and refused.json()["error"]["param"] == "messages"
    assert len(openai_stub.requests) == 1


def test_threads_are_per_caller(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("A's answer."), StubScript.text("B's answer."))
    _run(base_url, _input("same", "r-1", [{"id": "m1", "role": "user", "content": "secret of A"}]), user="user-a")
    _run(base_url, _input("same", "r-1", [{"id": "m1", "role": "user", "content": "hello"}]), user="user-b")
    sent = [m.get("content") for m in openai_stub.requests[-1]["messages"]]
    assert "secret of A" not in sent and "A's answer." not in sent


def test_a_failed_run_ends_with_run_error(base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(*[StubScript.error(400, "model refuses")] * 4)
    events = _run(base_url, _input("t-4", "r-1", [{"id": "m1", "role": "user", "content": "fail"}]))
    assert events[-1].type == EventType.RUN_ERROR and events[-1].code == "llm_unavailable"


@pytest.mark.parametrize(
    ("agent", "patch", "status", "param"),
    [
        ("no-such-agent", {}, 404, "agentKey"),
        (None, {"messages": [{"id": "a", "role": "assistant", "content": "hi"}]}, 422, "messages"),
        (None, {"tools": [{"name": "bad name!", "description": "x", "parameters": {}}]}, 422, "tools"),
        (None, {"threadId": ""}, 422, "threadId"),
        (None, {"messages": [{"id": "m", "role": "user", "content": "x" * 40000}]}, 413, "messages"),
    ],
)
def test_bad_input_is_refused_before_the_stream(
    base_url: str,
    openai_stub: OpenAiStub,
    context: AppContext,
    agent: str | None,
    patch: dict[str, Any],
    status: int,
    param: str,
) -> None:
    body = {**_input("t-5", "r-1", [{"id": "m1", "role": "user", "content": "hi"}]), **patch}
    response = httpx.post(_api(base_url, agent), json=body, headers={"Authorization": "Bearer user-a"})
    assert response.status_code == status and response.json()["error"]["param"] == param
    assert openai_stub.requests == []


NOTE = {"path": "notes/today.md", "content": "buy milk"}
APPROVAL_TOOL = {
    "name": "approve_tool_call",
    "description": "Ask the user to approve a tool call",
    "parameters": {"type": "object", "properties": {"toolCallId": {"type": "string"}}},
}


def _asks_approval(base_url: str, openai_stub: OpenAiStub, thread: str, call_id: str) -> tuple[list[Any], Any, str]:
    """A run whose model calls the gated `write_note`: its events, the question, and the id of the approval call
    the frontend renders."""
    openai_stub.enqueue(StubScript.tool_calls([{"id": call_id, "name": "write_note", "arguments": NOTE}]))
    question = [{"id": "m1", "role": "user", "content": "Write my note"}]
    events = _run(base_url, _input(thread, "r-1", question, [APPROVAL_TOOL]))
    starts = [(e.tool_call_id, e.tool_call_name) for e in events if e.type == EventType.TOOL_CALL_START]
    assert len(starts) == 2 and starts[0] == (call_id, "write_note") and starts[1][1] == "approve_tool_call"
    names = approval_wait(starts[1][0])  # the approval request's id names the call
    assert names is not None and names[1] == call_id
    return events, question, starts[1][0]


def _answer(thread: str, question: list[Any], approval_id: str, content: str) -> dict[str, Any]:
    """The next run's input as an AG-UI client sends it: the history plus the approval call's `tool` message."""
    asked = {"id": approval_id, "type": "function", "function": {"name": "approve_tool_call", "arguments": "{}"}}
    messages = [
        *question,
        {"id": "a1", "role": "assistant", "toolCalls": [asked]},
        {"id": "t1", "role": "tool", "toolCallId": approval_id, "content": content},
    ]
    return _input(thread, "r-2", messages, [APPROVAL_TOOL])


def test_an_approval_is_a_frontend_tool_call_whose_result_continues_the_next_run_once(
    base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    # Given a model that calls a tool that needs approval
    events, question, approval_id = _asks_approval(base_url, openai_stub, "t-approve", "call_n")
    # Then the frontend is asked through a call of approve_tool_call naming the call, and the run ends
    args = json.loads(
        "".join(e.delta for e in events if e.type == EventType.TOOL_CALL_ARGS and e.tool_call_id == approval_id)
    )
    reason = "write_note always needs approval"
    assert args == {"toolCallId": "call_n", "toolName": "write_note", "args": NOTE, "reason": reason}
    assert events[-1].type == EventType.RUN_FINISHED and tool.executions == []
    assert not any(e.type == EventType.TOOL_CALL_RESULT for e in events)
    # And the declared approve_tool_call is never offered to the model
    assert [t["function"]["name"] for t in openai_stub.requests[0]["tools"]] == ["write_note"]
    # When the frontend answers it with an approval
    openai_stub.enqueue(StubScript.text("Noted."))
    body = _answer("t-approve", question, approval_id, '{"approve": true}')
    after = _run(base_url, body)
    # Then the next run starts with the call's result (it ran once), then the model's answer
    assert after[1].type == EventType.TOOL_CALL_RESULT and after[1].tool_call_id == "call_n"
    assert json.loads(after[1].content) == {"written": "notes/today.md", "bytes": 8}
    assert not any(e.type == EventType.TOOL_CALL_START for e in after)  # the call was the last run's
    assert any(e.type == EventType.TEXT_MESSAGE_CONTENT and e.delta == "Noted." for e in after)
    assert tool.executions == ["call_n"] and audit_approvals(audit) == [("call_n", "approved")]
    # And the same input again (the same runId) gets that run's events again: nothing is decided or run twice
    assert _run(base_url, body) == after
    # While the same answer in another run is refused before any work (the call is answered)
    again = httpx.post(_api(base_url), json={**body, "runId": "r-3"}, headers={"Authorization": "Bearer user-a"})
    assert again.status_code == 422 and again.json()["error"]["code"] == "approval_request_not_found"
    assert tool.executions == ["call_n"] and len(openai_stub.requests) == 2


def test_a_denied_approval_is_told_to_the_model_and_a_bad_answer_is_refused(
    base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    _, question, approval_id = _asks_approval(base_url, openai_stub, "t-deny", "call_d")
    auth = {"Authorization": "Bearer user-a"}
    for bad in ('{"approve": "yes"}', "sure", '{"approve": true, "reason": 5}'):
        refused = httpx.post(_api(base_url), json=_answer("t-deny", question, approval_id, bad), headers=auth)
        assert refused.status_code == 422 and refused.json()["error"]["param"].startswith("messages")
    forged = _answer("t-deny", question, approval_id.replace("call_d", "call_other"), '{"approve": true}')
    refused = httpx.post(_api(base_url), json=forged, headers=auth)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "approval_request_not_found"
    openai_stub.enqueue(StubScript.text("I left it."))
    after = _run(base_url, _answer("t-deny", question, approval_id, '{"approve": false, "reason": "not today"}'))
    result = json.loads(after[1].content)
    assert after[1].type == EventType.TOOL_CALL_RESULT and result["status"] == "denied"
    assert result["reason"] == "approval_denied"
    told = json.loads(openai_stub.requests[-1]["messages"][-1]["content"])
    assert "not today" in told["error"]["message"] and tool.executions == []
    assert audit_approvals(audit) == [("call_d", "denied")]
