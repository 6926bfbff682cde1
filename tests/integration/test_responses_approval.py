"""Approvals on /v1/responses, driven by the real openai SDK over loopback HTTP on moto (tests/support/responses_app.py):
the response ends with an `mcp_approval_request`; the next request's `mcp_approval_response` decides it, once."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.responses import Response

from agent_core.context import AppContext
from agent_core.domain.approval import parse_policy
from tests.support.approvals import BIG_NOTES, RecordingTool
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.responses_app import wait_status


@pytest.fixture
def note_tool(context: AppContext) -> RecordingTool:
    """`write_note` on the main agent, every call of it gated by the deployment's approval rules."""
    tool = RecordingTool()
    context.deps.tools.registry.register(tool)
    context.deps.tools.approvals["write_note"] = [parse_policy("always")]
    for agent in context.deps.agents.all():
        agent.tools.append(type(agent.tools[0])(name="write_note"))
    return tool


def _asks(openai_stub: OpenAiStub, client: openai.OpenAI) -> Response:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_n", "name": "write_note", "arguments": {"path": "a.txt", "content": "hi"}}])
    )
    return client.responses.create(model="main-agent", input="write a note")


def _answer(client: openai.OpenAI, previous: str, request_id: str, approve: bool, **extra: Any) -> Response:
    item = {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve, **extra}
    return client.responses.create(model="main-agent", previous_response_id=previous, input=[item])


def test_an_approved_call_runs_once_in_the_next_response(
    client: openai.OpenAI, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    # Given a model that calls a gated tool
    first = _asks(openai_stub, client)
    # Then the response ends with the approval request; nothing ran
    assert first.status == "completed" and note_tool.executions == []
    request = next(o for o in first.output if o.type == "mcp_approval_request")
    assert request.name == "write_note" and request.server_label == "main-agent"
    assert request.arguments == '{"path": "a.txt", "content": "hi"}'
    assert first.output[-1].type == "mcp_approval_request"
    # When the client approves it in the next request
    openai_stub.enqueue(StubScript.text("Written."))
    second = _answer(client, first.id, request.id, True)
    # Then the tool ran once, as an mcp_call of that response, and the model read its result
    assert note_tool.executions == ["call_n"]
    call = next(o for o in second.output if o.type == "mcp_call")
    assert call.name == "write_note" and call.status == "completed" and call.output is not None
    assert "a.txt" in call.output and second.output_text == "Written."
    sent = openai_stub.requests[-1]["messages"]
    assert next(m for m in sent if m.get("tool_calls"))["tool_calls"][0]["id"] == "call_n"
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_n" and "a.txt" in m["content"] for m in sent)
    # And a replay of the same answer is refused (409), running nothing
    with pytest.raises(openai.ConflictError) as replayed:
        _answer(client, first.id, request.id, True)
    assert isinstance(replayed.value.body, dict) and replayed.value.body["code"] == "approval_already_decided"
    assert note_tool.executions == ["call_n"]


def test_a_denied_call_never_runs_and_the_model_reads_the_denial(
    client: openai.OpenAI, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    first = _asks(openai_stub, client)
    request = next(o for o in first.output if o.type == "mcp_approval_request")
    openai_stub.enqueue(StubScript.text("I did not write it."))
    with client.responses.stream(
        model="main-agent",
        previous_response_id=first.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False, "reason": "no"}],
    ) as stream:
        types = [e.type for e in stream]
        second = stream.get_final_response()
    assert note_tool.executions == [] and "response.mcp_call.failed" in types
    call = next(o for o in second.output if o.type == "mcp_call")
    assert call.status == "failed" and call.error is not None
    told = next(m for m in openai_stub.requests[-1]["messages"] if m.get("tool_call_id") == "call_n")
    assert "approval_denied" in told["content"] and "no" in told["content"]


def test_approval_answers_that_do_not_fit_are_refused_before_any_work(
    client: openai.OpenAI, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    first = _asks(openai_stub, client)
    request = next(o for o in first.output if o.type == "mcp_approval_request")
    asked = len(openai_stub.requests)
    # An unknown request id, a missing answer, a new message instead, no previous response
    with pytest.raises(openai.BadRequestError) as unknown:
        _answer(client, first.id, "mcpr_nope__x", True)
    assert isinstance(unknown.value.body, dict) and unknown.value.body["code"] == "approval_request_not_found"
    with pytest.raises(openai.BadRequestError) as missing:
        client.responses.create(model="main-agent", previous_response_id=first.id, input="hello?")
    assert isinstance(missing.value.body, dict) and missing.value.body["code"] == "approval_response_missing"
    with pytest.raises(openai.BadRequestError) as alone:
        client.responses.create(
            model="main-agent",
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
        )
    assert isinstance(alone.value.body, dict) and alone.value.body["code"] == "approval_needs_previous_response"
    # Another user cannot decide it
    other = openai.OpenAI(base_url=str(client.base_url), api_key="user-b", max_retries=0, timeout=30)
    with pytest.raises(openai.BadRequestError):
        _answer(other, first.id, request.id, True)
    assert len(openai_stub.requests) == asked and note_tool.executions == []
    # The owner's answer still decides it
    openai_stub.enqueue(StubScript.text("Done."))
    assert _answer(client, first.id, request.id, True).output_text == "Done."
    assert note_tool.executions == ["call_n"]


def test_a_background_answer_and_a_retried_create_decide_once(
    client: openai.OpenAI, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    # Given two approval requests answered: one in a background response, one by a create retried with its key
    first = _asks(openai_stub, client)
    request = next(o for o in first.output if o.type == "mcp_approval_request")
    openai_stub.enqueue(StubScript.text("Written in the background."))
    item = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    queued = client.responses.create(model="main-agent", previous_response_id=first.id, input=[item], background=True)
    done = wait_status(client, queued.id, {"completed", "failed"})
    # Then the background run (planned twice: the create, then its run) consumed the approval once and ran it
    assert done.status == "completed" and done.output_text == "Written in the background."
    assert note_tool.executions == ["call_n"]
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_m", "name": "write_note", "arguments": {"path": "b.txt"}}]))
    again = client.responses.create(model="main-agent", previous_response_id=done.id, input="one more note")
    second = next(o for o in again.output if o.type == "mcp_approval_request")
    openai_stub.enqueue(StubScript.text("Second note written."))
    answer = {"type": "mcp_approval_response", "approval_request_id": second.id, "approve": True}
    key = {"Idempotency-Key": "approve-second-note"}
    created = [
        client.responses.create(model="main-agent", previous_response_id=again.id, input=[answer], extra_headers=key)
        for _ in range(2)
    ]
    # And the retry answered with the first attempt's Response: the note was written once
    assert created[0].id == created[1].id and created[1].output_text == "Second note written."
    assert note_tool.executions == ["call_n", "call_m"]


def test_a_call_awaiting_approval_shows_only_as_its_request_then_as_the_mcp_call_that_answers_it(
    client: openai.OpenAI, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    # Given a model that calls a gated tool, streamed
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_n", "name": "write_note", "arguments": {"path": "a.txt", "content": "hi"}}])
    )
    with client.responses.stream(model="main-agent", input="write a note") as stream:
        events = list(stream)
        first = stream.get_final_response()
    # Then the call shows only as its mcp_approval_request: no mcp_call item nor mcp_call event, live or stored
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == ["mcp_approval_request"]
    assert [e.type for e in events if e.type.startswith("response.mcp_call")] == []
    assert [o.type for o in first.output] == ["mcp_approval_request"]
    assert [o.type for o in client.responses.retrieve(first.id).output] == ["mcp_approval_request"]
    # And the stream encoded again from the run's log is the live one
    with client.responses.retrieve(first.id, stream=True, starting_after=0) as resumed:
        again = [(e.sequence_number, e.type) for e in resumed]
    assert again == [(e.sequence_number, e.type) for e in events if e.sequence_number > 0]
    request = first.output[0]
    assert request.type == "mcp_approval_request"
    # And the conversation lists it as that request too
    assert first.conversation is not None
    pending = client.conversations.items.list(first.conversation.id, order="asc").data
    assert [item.type for item in pending] == ["message", "mcp_approval_request"]
    assert pending[1].id == request.id and pending[1].name == "write_note" and pending[1].arguments == request.arguments
    # When it is approved, the next response runs it as an mcp_call naming the request it answers
    openai_stub.enqueue(StubScript.text("Written."))
    second = _answer(client, first.id, request.id, True)
    call = next(o for o in second.output if o.type == "mcp_call")
    assert call.approval_request_id == request.id and call.status == "completed"
    # And the conversation lists it as that mcp_call (with its output), not as a client's function call
    assert second.conversation is not None
    items = client.conversations.items.list(second.conversation.id, order="asc").data
    assert [item.type for item in items] == ["message", "mcp_call", "message"]
    listed = items[1]
    assert listed.type == "mcp_call" and listed.name == "write_note" and listed.approval_request_id == request.id
    assert listed.output is not None and "a.txt" in listed.output
    assert note_tool.executions == ["call_n"]


def test_a_gated_call_that_asks_nobody_shows_as_the_mcp_call_it_is(
    client: openai.OpenAI, context: AppContext, openai_stub: OpenAiStub, note_tool: RecordingTool
) -> None:
    # Given a tool whose calls need approval only for big notes, and a small one
    context.deps.tools.approvals["write_note"] = [parse_policy(BIG_NOTES)]
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_s", "name": "write_note", "arguments": {"path": "s.txt", "content": "hi"}}])
    )
    openai_stub.enqueue(StubScript.text("Small note written."))
    with client.responses.stream(model="main-agent", input="write a small note") as stream:
        events = list(stream)
        response = stream.get_final_response()
    # Then it ran at once and streamed as an mcp_call: added, in progress, its arguments, completed, done
    assert note_tool.executions == ["call_s"]
    mcp = [e.type for e in events if "mcp" in e.type or getattr(getattr(e, "item", None), "type", "") == "mcp_call"]
    assert mcp == [
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert [o.type for o in response.output] == ["mcp_call", "message"]
    call = response.output[0]
    assert call.type == "mcp_call" and call.status == "completed" and call.approval_request_id is None
    assert call.arguments == '{"path": "s.txt", "content": "hi"}' and response.output_text == "Small note written."
