"""The Vercel AI SDK UI message stream (stream function): POST /api/ui-stream, `useChat`'s default transport.

The client may declare its own tools in the body (`tools`, sent with the transport's `body` option): a call
to one ends the run with its `tool-input-available` chunk (not `providerExecuted`), the client runs it
(`onToolCall` / `addToolResult`) and sends the assistant message back with the tool part's output: the
run continues from that output.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.sse import EventStream, stream_refusal, stream_run
from agent_core.context import AppContext
from agent_core.domain.ids import sortable_id
from agent_core.errors import InvalidRequest, TooManyRequests
from agent_core.runtime.pending import PendingTurn
from agent_core.wires.client_turn import start_client_turn
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


def _new_input(body: UiStreamIn) -> list[dict[str, Any]]:
    """The user's new message, or the outputs of the client's tools in the returned assistant message."""
    if body.trigger != "submit-message":
        raise InvalidRequest("only trigger submit-message is supported", param="trigger", code="unsupported_trigger")
    last, where = body.messages[-1], f"messages[{len(body.messages) - 1}]"
    if last.role == "assistant":
        client = {t.name for t in body.tools}
        outputs = [
            _output(part, f"{where}.parts[{n}]")
            for n, part in enumerate(last.parts)
            if _tool_name(part) in client
            and not part.get("providerExecuted")
            and part.get("state") in ("output-available", "output-error")
        ]
        if not outputs:
            raise InvalidRequest("the assistant message carries no output of the client's tools", param="messages")
        return outputs
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
    try:
        prepared = await start_client_turn(
            ctx.deps,
            user,
            client_id=body.id,
            input_items=_new_input(body),
            tools=tools,
            now=request_now(request),
            public_base_url=link_base(request),
        )
    except TooManyRequests as refusal:  # `start`, then an `error` part: what useChat shows as its error
        encoder = UiStreamEncoder(f"msg_{sortable_id()}", client_tools=client_tools)
        return stream_refusal(ctx, encoder, refusal, headers=HEADERS)
    turn_events = PendingTurn(prepared)
    encoder = UiStreamEncoder(f"msg_{prepared.run.run_id}", client_tools=client_tools)
    return stream_run(ctx, encoder, turn_events.events(), turn=turn_events, headers=HEADERS)
