"""The Vercel AI SDK UI message stream (stream function): POST /api/ui-stream, `useChat`'s default transport.

The client may declare its own tools in the body (`tools`, sent with the transport's `body` option): a call
to one ends the run with its `tool-input-available` chunk (not `providerExecuted`), the client runs it
(`onToolCall` / `addToolResult`) and sends the assistant message back with the tool part's output: the
run continues from that output.

A call that needs approval ends the run with its `tool-approval-request`; the next request's assistant
message carries the part in state `approval-responded` with `approval: {id, approved, reason?}` (what
`addToolApprovalResponse` writes): the decision is taken once (409 for a replay), the call runs (or is
refused), then the model answers, streamed as the continuation of that message (docs/approval.md).

`GET /api/ui-stream/{chatId}/stream` is what `useChat({resume: true})` asks (the transport's
`reconnectToStream`): the chat's run that is going on, its whole message again from `start` (the SDK replaces
what it had with it), or after `Last-Event-ID` when the client sends one; 204 when no run is going on
(`wires/frame_resume.py`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.schemas import PathId
from agent_core.api.sse import EventStream, stream_frames, stream_refusal, stream_run
from agent_core.context import AppContext
from agent_core.domain.ids import sortable_id
from agent_core.errors import InvalidRequest, NotFound, TooManyRequests
from agent_core.runtime.pending import PendingTurn
from agent_core.wires.client_turn import approval_item, client_chat_id, start_client_turn
from agent_core.wires.frame_resume import active_run, frame_id, resumed_frames, run_log_events
from agent_core.wires.input import function_tools
from agent_core.wires.ui_stream import HEADERS, UiStreamEncoder

router = APIRouter(prefix="/api", tags=["ui stream"], responses=error_responses(400, 401, 404, 409, 413, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


class UiMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(max_length=128)
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]] = Field(default_factory=list)


class UiTool(BaseModel):
    """A tool the browser runs (declared in the body, as AG-UI clients declare theirs)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class UiStreamIn(BaseModel):
    """useChat's default request body (plus the client's `tools`); only the last message is read: the new
    user message, or the assistant message carrying the outputs of the client's tools."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=128)
    messages: list[UiMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(None, alias="messageId", max_length=128)
    tools: list[UiTool] = Field(default_factory=list)


def _tool_name(part: dict[str, Any]) -> str | None:
    """The tool a UI tool part stands for (`tool-{name}`, or a `dynamic-tool` with its toolName)."""
    kind = str(part.get("type") or "")
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    return kind.removeprefix("tool-") if kind.startswith("tool-") else None


def _output(part: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = part.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest("a tool part needs its toolCallId", param=where)
    if part.get("state") == "output-error":
        value: Any = {"error": part.get("errorText") or "the tool failed"}
    else:
        value = part.get("output")
    output = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _approval(part: dict[str, Any], where: str) -> dict[str, Any]:
    """A tool part in state `approval-responded`: the person's decision (ai 6's `approval` object) as an input
    item (its id, `approved` and `reason` are checked as every wire's approval answers are)."""
    approval = part.get("approval")
    if not isinstance(approval, dict):
        raise InvalidRequest("an approval-responded part needs its approval", param=where)
    return approval_item(approval.get("id"), approval.get("approved"), approval.get("reason"))


def _new_input(body: UiStreamIn) -> list[dict[str, Any]]:
    """The user's new message, or what the returned assistant message answers: the outputs of the client's
    tools and the decisions on calls that needed approval."""
    if body.trigger != "submit-message":
        raise InvalidRequest("only trigger submit-message is supported", param="trigger", code="unsupported_trigger")
    last, where = body.messages[-1], f"messages[{len(body.messages) - 1}]"
    if last.role == "assistant":
        client = {t.name for t in body.tools}
        answers = [
            _output(part, f"{where}.parts[{n}]")
            for n, part in enumerate(last.parts)
            if _tool_name(part) in client
            and not part.get("providerExecuted")
            and part.get("state") in ("output-available", "output-error")
        ]
        answers += [
            _approval(part, f"{where}.parts[{n}]")
            for n, part in enumerate(last.parts)
            if _tool_name(part) is not None and part.get("state") == "approval-responded"
        ]
        if not answers:
            raise InvalidRequest(
                "the assistant message carries no output of the client's tools and no approval", param="messages"
            )
        return answers
    if last.role != "user":
        raise InvalidRequest("the last message must be the user's new message", param="messages")
    texts = [p.get("text") for p in last.parts if p.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("the user message needs a text part", param="messages")
    return [{"type": "message", "role": "user", "content": "\n".join(cast(list[str], texts))}]


@router.post("/ui-stream", response_class=EventStreamResponse)
async def ui_stream(body: UiStreamIn, request: Request, ctx: Ctx, user: User) -> EventStream:
    """One assistant message as UI message chunks; the chat `id` is a chat of the caller (created on first use)."""
    tools = function_tools(body.tools or [])
    client_tools = frozenset(t.name for t in tools)
    last = body.messages[-1]
    try:
        prepared = await start_client_turn(
            ctx.deps,
            user,
            client_id=body.id,
            input_items=_new_input(body),
            tools=tools,
            now=request_now(request),
            public_base_url=link_base(request),
            # A request that answers the last message's calls continues that message (useChat appends to it).
            ui_message_id=last.id if last.role == "assistant" else None,
        )
    except TooManyRequests as refusal:  # `start`, then an `error` part: what useChat shows as its error
        encoder = UiStreamEncoder(f"msg_{sortable_id()}", client_tools=client_tools)
        return stream_refusal(ctx, encoder, refusal, headers=HEADERS)
    turn_events = PendingTurn(prepared)
    encoder = UiStreamEncoder.of_run(prepared.run, client_tools)
    return stream_run(ctx, encoder, turn_events.events(), turn=turn_events, headers=HEADERS)


@router.get(
    "/ui-stream/{chat_id}/stream",
    response_class=EventStreamResponse,
    responses={204: {"description": "No run of the chat is going on: nothing to resume"}, **error_responses(410)},
)
async def ui_stream_resume(
    chat_id: PathId,
    ctx: Ctx,
    user: User,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> Response:
    """Resume the chat's run that is going on (`useChat({resume: true})`), on any instance: its UI message
    stream from `start`, or the chunks after `Last-Event-ID`; 204 when none is going on; 404 for a chat the
    caller does not have."""
    after = frame_id(last_event_id)
    chat = await ctx.deps.chats.get_chat(client_chat_id(user, chat_id), user)
    if chat is None:
        raise NotFound("chat not found", param="chatId", code="chat_not_found")
    run = await active_run(ctx.deps, chat)
    if run is None:
        return Response(status_code=204)
    events = await run_log_events(ctx.deps, run)
    encoder = UiStreamEncoder.of_run(run)  # the client's tools: learnt from the run's events
    frames = resumed_frames(encoder, run, events, after)
    return stream_frames(ctx, frames, lambda f: encoder.sse(f.frame), ids=lambda f: f.id, headers=HEADERS)
