"""The Vercel AI SDK UI message stream (stream function): POST /api/ui-stream, `useChat`'s default transport."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.sse import EventStream, Messages, sse_message, sse_response
from agent_core.context import AppContext
from agent_core.errors import InvalidRequest
from agent_core.openai_api.client_turn import start_client_turn
from agent_core.protocol.ui_stream import DONE, HEADERS, UiStreamEncoder
from agent_core.runtime.pending import PendingTurn

router = APIRouter(prefix="/api", tags=["ui stream"], responses=error_responses(400, 401, 404, 409, 413, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


class UiMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(max_length=128)
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]] = Field(default_factory=list)


class UiStreamIn(BaseModel):
    """useChat's default request body; only the last message (the new user message) is read."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=128)
    messages: list[UiMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(None, alias="messageId", max_length=128)


def _user_text(body: UiStreamIn) -> str:
    if body.trigger != "submit-message":
        raise InvalidRequest("only trigger submit-message is supported", param="trigger", code="unsupported_trigger")
    last = body.messages[-1]
    if last.role != "user":
        raise InvalidRequest("the last message must be the user's new message", param="messages")
    texts = [p.get("text") for p in last.parts if p.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("the user message needs a text part", param="messages")
    return "\n".join(cast(list[str], texts))


@router.post("/ui-stream", response_class=EventStreamResponse)
async def ui_stream(body: UiStreamIn, request: Request, ctx: Ctx, user: User) -> EventStream:
    """One assistant message as UI message chunks; the chat `id` is a chat of the caller (created on first use)."""
    prepared = await start_client_turn(
        ctx.deps,
        ctx.responses,
        user,
        client_id=body.id,
        input_items=[{"type": "message", "role": "user", "content": _user_text(body)}],
        now=request_now(request),
        public_base_url=link_base(request),
    )
    turn_events = PendingTurn(prepared)
    encoder = UiStreamEncoder(f"msg_{prepared.run.run_id}")

    async def stream() -> Messages:
        for part in encoder.opening():
            yield sse_message(part)
        async with contextlib.aclosing(turn_events.events()) as envelopes:
            async for envelope in envelopes:
                for part in encoder.feed(envelope):
                    yield sse_message(part)
        yield sse_message(DONE)

    return sse_response(ctx, stream(), turn=turn_events, headers=HEADERS)
