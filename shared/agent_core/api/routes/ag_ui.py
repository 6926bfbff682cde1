"""AG-UI (stream function): POST /api/ag-ui (the default agent) and POST /api/ag-ui/{agentKey}.

The body is AG-UI's RunAgentInput; the answer is its event stream (SSE, camelCase). `threadId` names a
chat of the caller (created on first use) whose stored history is authoritative: only the trailing
user and tool messages of `messages` are new input. The client's `tools` are frontend tools: a call
to one ends the run (TOOL_CALL_START/ARGS/END, then RUN_FINISHED) and its `tool` message in the next
run's input continues the conversation.

A call that needs approval is put to the frontend as a call of the client tool `approve_tool_call` (its id
the approval request's, arguments {toolCallId, toolName, args, reason}; the frontend renders it and need not
declare it: a declared tool of that name is never offered to the model). Its `tool` message in the next
run's input answers it with the JSON {approve: true|false, reason?}: the decision is taken once (409 for a
replay), the call runs (or is refused), then the model goes on (docs/approval.md).

A client whose stream dropped reconnects by posting the same RunAgentInput again (the same `threadId` and
`runId`) while that run is going on: the answer is the run's events from RUN_STARTED, or those after the
`Last-Event-ID` it sends (the SSE id of the last event it got), then the live ones to RUN_FINISHED or RUN_ERROR;
its `messages` are not read again (`wires/frame_resume.py`). Another `runId` while a run is going on is 409
`run_in_progress`. Once the run ended, the same input posted again (the same `runId` and new messages: the
run's request id is made of both) gets that run's events again, from its log or its stored replay, never a
second run; with `Last-Event-ID` those after it (204 when none is left). New messages under the same `runId`
are another run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncGenerator
from typing import Annotated, Any, TypeVar, cast

from ag_ui.core import RunAgentInput, ToolMessage, UserMessage
from fastapi import APIRouter, Depends, Header, Path, Request, Response

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.sse import stream_frames, stream_refusal, stream_run
from agent_core.context import AppContext
from agent_core.domain.models import Run, RunStatus
from agent_core.errors import InvalidRequest, TooManyRequests
from agent_core.runtime.pending import PendingTurn
from agent_core.wires.ag_ui import APPROVAL_TOOL, AgUiEncoder
from agent_core.wires.approval_answers import approval_wait
from agent_core.wires.client_turn import approval_item, client_chat_id, start_client_turn
from agent_core.wires.frame_resume import (
    FrameId,
    active_run,
    ended_run_events,
    frame_id,
    resumed_frames,
    run_log_events,
)
from agent_core.wires.input import function_tools

router = APIRouter(prefix="/api", tags=["ag-ui"], responses=error_responses(400, 401, 404, 409, 413, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
AgentKey = Annotated[str, Path(min_length=1, max_length=64)]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)]
MAX_THREAD_ID = 128
F = TypeVar("F")


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = [getattr(part, "text", None) for part in content or []]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("only text content is supported", param=f"{where}.content")
    return "\n".join(cast(list[str], texts))


def _approval(message: ToolMessage, where: str) -> dict[str, Any]:
    """The answer to an approval (`approve_tool_call`'s result, `{"approve": true|false, "reason"?: text}`) as
    an input item (checked as every wire's approval answers are)."""
    try:
        answer = json.loads(_text(message.content, where))
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise InvalidRequest(
            'an approval\'s result is {"approve": true|false, "reason"?: text}', param=f"{where}.content"
        )
    return approval_item(message.tool_call_id, answer.get("approve"), answer.get("reason"))


def _new_input(body: RunAgentInput) -> list[dict[str, Any]]:
    """The trailing user and tool messages as input items (the earlier ones are the stored history); the result
    of an `approve_tool_call` call is the decision on the approval it asked for."""
    start = len(body.messages)
    while start > 0 and body.messages[start - 1].role in ("user", "tool"):
        start -= 1
    items: list[dict[str, Any]] = []
    for n in range(start, len(body.messages)):
        message, where = body.messages[n], f"messages[{n}]"
        if isinstance(message, UserMessage):
            items.append({"type": "message", "role": "user", "content": _text(message.content, where)})
        elif isinstance(message, ToolMessage) and approval_wait(message.tool_call_id) is not None:
            items.append(_approval(message, where))
        elif isinstance(message, ToolMessage):
            output = _text(message.content, where)
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": output})
    if not items:
        raise InvalidRequest("messages must end with a user message or tool results", param="messages")
    return items


def run_request_id(run_id: str, input_items: list[dict[str, Any]]) -> str:
    """The request id of the run a RunAgentInput starts: its `runId` and new input, so a re-post of the same
    input finds that run by its request marker, and new messages under the same `runId` make another run."""
    given = json.dumps({"runId": run_id, "input": input_items}, sort_keys=True, ensure_ascii=False)
    return f"agui_{hashlib.sha256(given.encode()).hexdigest()[:32]}"


async def _reconnect(body: RunAgentInput, ctx: AppContext, user: str, last_event_id: str | None) -> Response | None:
    """The answer to a reconnect or a re-post: the thread's run under this `runId` that is going on, or that
    ended and was started by this very input, its events again; None when the request is neither (it starts a
    run; a run of this input whose process died is run again, as a repeated requestId's is)."""
    after = frame_id(last_event_id)
    chat = await ctx.deps.chats.get_chat(client_chat_id(user, body.thread_id), user)
    run = await active_run(ctx.deps, chat) if chat is not None else None
    if run is not None and run.client_run_id == body.run_id:
        encoder = AgUiEncoder.of_run(body.thread_id, body.run_id, run)  # the client's tools: learnt from its events
        frames = resumed_frames(encoder, run, await run_log_events(ctx.deps, run), after)
        return stream_frames(ctx, frames, lambda f: encoder.sse(f.frame), ids=lambda f: f.id)
    if chat is None:
        return Response(status_code=204) if after is not None else None
    request_id = run_request_id(body.run_id, _new_input(body))  # (a reconnect to a running run reads no input)
    ended = await ctx.deps.turns.run_for_request(chat.chat_id, request_id)
    if ended is None or ended.client_run_id != body.run_id or ended.status == RunStatus.RUNNING:
        return Response(status_code=204) if after is not None else None
    return await _ended(body, ctx, ended, after)


async def _ended(body: RunAgentInput, ctx: AppContext, run: Run, after: FrameId | None) -> Response:
    """An ended run's events again: all (from its log, else its stored replay), or those after `Last-Event-ID`
    (204 when none is left, or its log is gone)."""
    events = await ended_run_events(ctx.deps, run, from_start=after is None)
    if events is None:
        return Response(status_code=204)
    encoder = AgUiEncoder.of_run(body.thread_id, body.run_id, run)
    frames = resumed_frames(encoder, run, events, after)
    first = await anext(frames, None)
    if first is None:
        return Response(status_code=204)
    return stream_frames(ctx, _led_by(first, frames), lambda f: encoder.sse(f.frame), ids=lambda f: f.id)


async def _led_by(first: F, rest: AsyncGenerator[F, None]) -> AsyncGenerator[F, None]:
    yield first
    async with contextlib.aclosing(rest):
        async for frame in rest:
            yield frame


async def _run(
    body: RunAgentInput, agent_key: str | None, request: Request, ctx: AppContext, user: str, last_event_id: str | None
) -> Response:
    if not body.thread_id or len(body.thread_id) > MAX_THREAD_ID:
        raise InvalidRequest(f"threadId must have 1 to {MAX_THREAD_ID} characters", param="threadId")
    reconnected = await _reconnect(body, ctx, user, last_event_id)
    if reconnected is not None:
        return reconnected
    input_items = _new_input(body)
    request_id = run_request_id(body.run_id, input_items)
    tools = function_tools([t for t in body.tools or [] if t.name != APPROVAL_TOOL])
    client_tools = frozenset(t.name for t in tools)
    try:
        prepared = await start_client_turn(
            ctx.deps,
            user,
            client_id=body.thread_id,
            input_items=input_items,
            agent_key=agent_key,
            tools=tools,
            now=request_now(request),
            public_base_url=link_base(request),
            client_run_id=body.run_id,
            request_id=request_id,
        )
    except TooManyRequests as refusal:  # RUN_STARTED, then RUN_ERROR with the code: what AG-UI clients show
        return stream_refusal(ctx, AgUiEncoder(body.thread_id, body.run_id, client_tools=client_tools), refusal)
    turn_events = PendingTurn(prepared)
    encoder = AgUiEncoder.of_run(body.thread_id, body.run_id, prepared.run, client_tools)
    return stream_run(ctx, encoder, turn_events.events(), turn=turn_events)


RECONNECTED: dict[int | str, dict[str, Any]] = {
    204: {"description": "A reconnect (`Last-Event-ID`) with nothing left to send: no run of it, or it has them all"}
}


@router.post("/ag-ui", response_class=EventStreamResponse, responses={**RECONNECTED, **error_responses(410)})
async def ag_ui_default(
    body: RunAgentInput, request: Request, ctx: Ctx, user: User, last_event_id: LastEventId = None
) -> Response:
    """Run the default agent for an AG-UI client (or reconnect to its run: the same threadId and runId)."""
    return await _run(body, None, request, ctx, user, last_event_id)


@router.post(
    "/ag-ui/{agent_key}", response_class=EventStreamResponse, responses={**RECONNECTED, **error_responses(410)}
)
async def ag_ui_agent(
    agent_key: AgentKey,
    body: RunAgentInput,
    request: Request,
    ctx: Ctx,
    user: User,
    last_event_id: LastEventId = None,
) -> Response:
    """Run the agent `agentKey` (404 `agent_not_found` when unknown) for an AG-UI client (or reconnect)."""
    return await _run(body, agent_key, request, ctx, user, last_event_id)
