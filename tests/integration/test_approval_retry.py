"""A decision whose turn does not open is not lost: the approval waits again for the client's retry.

Each wire that hands a call over for approval (Responses, the UI stream, AG-UI) decides it with the WAIT item's
conditional update right before the turn takes the chat's lease. Here another run holds that lease when the
decision comes: 409 `run_in_progress`, the call not run; the same request again once the lease is free runs
the call, once. Real HTTP (uvicorn) on moto, the stub as the model (tests/support/responses_app.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent_core.context import AppContext
from agent_core.domain.models import WaitStatus
from agent_core.runtime.agents import DEFAULT_AGENT
from agent_core.runtime.pending import release_unstarted_turn
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.wires.approval_answers import approval_wait
from tests.support.client_approvals import audit_approvals, gate_writer
from tests.support.openai_stub import OpenAiStub, StubScript

USER = {"Authorization": "Bearer user-a"}
NOTE = {"path": "notes/today.md", "content": "buy milk"}
APPROVE_TOOL = {"name": "approve_tool_call", "description": "Ask to approve", "parameters": {"type": "object"}}
Ask = Callable[[str], tuple[str, dict[str, Any]]]  # root url -> (the approval's id, the request that approves it)


def _data(response: httpx.Response) -> list[str]:
    return [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]


def _ask_responses(root: str) -> tuple[str, dict[str, Any]]:
    first = httpx.post(f"{root}/v1/responses", json={"model": DEFAULT_AGENT, "input": "Write my note"}, headers=USER)
    assert first.status_code == 200, first.text
    [asked] = [o for o in first.json()["output"] if o["type"] == "mcp_approval_request"]
    answer = {"type": "mcp_approval_response", "approval_request_id": asked["id"], "approve": True}
    body = {"model": DEFAULT_AGENT, "previous_response_id": first.json()["id"], "input": [answer]}
    return asked["id"], {"url": f"{root}/v1/responses", "json": body}


def _ask_ui_stream(root: str) -> tuple[str, dict[str, Any]]:
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Write my note"}]}
    first = httpx.post(f"{root}/api/ui-stream", json={"id": "chat-l", "messages": [question]}, headers=USER)
    chunks = [json.loads(d) for d in _data(first)[:-1]]
    [asked] = [c for c in chunks if c["type"] == "tool-approval-request"]
    part = {
        "type": "dynamic-tool",
        "toolName": "write_note",
        "toolCallId": asked["toolCallId"],
        "state": "approval-responded",
        "input": NOTE,
        "approval": {"id": asked["approvalId"], "approved": True},
    }
    answered = {"id": chunks[0]["messageId"], "role": "assistant", "parts": [part]}
    body = {"id": "chat-l", "messages": [question, answered]}
    return asked["approvalId"], {"url": f"{root}/api/ui-stream", "json": body}


def _ask_ag_ui(root: str) -> tuple[str, dict[str, Any]]:
    question = {"id": "m1", "role": "user", "content": "Write my note"}
    first = {"threadId": "t-l", "runId": "r-1", "state": {}, "messages": [question], "tools": [APPROVE_TOOL]}
    events = [
        json.loads(d) for d in _data(httpx.post(f"{root}/api/ag-ui", json={**first, "context": []}, headers=USER))
    ]
    [approval_id] = [
        e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "approve_tool_call"
    ]
    call = {"id": approval_id, "type": "function", "function": {"name": "approve_tool_call", "arguments": "{}"}}
    messages = [
        question,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": approval_id, "content": '{"approve": true}'},
    ]
    body = {**first, "runId": "r-2", "messages": messages, "context": []}
    return approval_id, {"url": f"{root}/api/ag-ui", "json": body}


def _hold_lease(context: AppContext, approval_id: str) -> PreparedTurn:
    """Another run of the user's takes the chat's lease (a turn opened in the chat, not yet streaming)."""
    names = approval_wait(approval_id)
    assert names is not None
    pointer = asyncio.run(context.deps.turns.get_run_pointer(names[0], int(time.time())))
    assert pointer is not None
    request = TurnRequest(user_id="user-a", message="meanwhile", chat_id=pointer.chat_id)
    prepared = asyncio.run(prepare_turn(context.deps, request))
    assert isinstance(prepared, PreparedTurn)
    return prepared


@pytest.mark.parametrize("ask", [_ask_responses, _ask_ui_stream, _ask_ag_ui], ids=["responses", "ui-stream", "ag-ui"])
def test_a_decision_whose_turn_cannot_open_waits_for_the_retry_and_the_call_runs_once(
    base_url: str, openai_stub: OpenAiStub, context: AppContext, ask: Ask
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    root = base_url.removesuffix("/v1")
    # Given a run that handed a call over for approval
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_n", "name": "write_note", "arguments": NOTE}]))
    approval_id, approve = ask(root)
    # When the approval comes while another run holds the chat's lease
    held = _hold_lease(context, approval_id)
    refused = httpx.post(approve["url"], json=approve["json"], headers=USER)
    # Then the turn does not open (409 run_in_progress), nothing ran, and the approval still waits
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_in_progress", refused.text
    assert tool.executions == [] and len(openai_stub.requests) == 1
    names = approval_wait(approval_id)
    assert names is not None
    wait = asyncio.run(context.deps.waits.get_wait(*names))
    assert wait is not None and wait.status == WaitStatus.WAITING and wait.approved is None and not wait.decided_by
    # When the other run lets the lease go and the client sends the same request again
    asyncio.run(release_unstarted_turn(held, "test"))
    openai_stub.enqueue(StubScript.text("Noted."))
    retried = httpx.post(approve["url"], json=approve["json"], headers=USER)
    # Then the call runs, once, and the model answers from its result
    assert retried.status_code == 200, retried.text
    assert "Noted." in retried.text
    assert tool.executions == ["call_n"] and audit_approvals(audit) == [("call_n", "approved")]
    # And the same request once more is refused before any work (the call was run); on AG-UI the same
    # RunAgentInput (its runId) is that run asked for again: its events again, nothing decided or run
    again = httpx.post(approve["url"], json=approve["json"], headers=USER)
    if ask is _ask_ag_ui:
        assert again.status_code == 200 and _data(again) == _data(retried)
    else:
        assert again.json()["error"]["code"] in ("approval_already_decided", "approval_request_not_found")
    assert tool.executions == ["call_n"] and len(openai_stub.requests) == 2
