"""The OpenAI Chat Completions API (stream function): POST /v1/chat/completions, streaming and not."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import error_responses, stream_or_json
from agent_core.api.sse import EventStream, stream_frames
from agent_core.context import AppContext
from agent_core.wires.chat_completions.execution import start_chat_completion
from agent_core.wires.chat_completions.request import ChatCompletionCreate

router = APIRouter(prefix="/v1", tags=["chat completions"], responses=error_responses(400, 401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        **stream_or_json("The chat.completion, or its chunks with `stream: true`"),
        **error_responses(404, 409, 413, 502, 503, 504),
    },
)
async def create_chat_completion(
    body: ChatCompletionCreate, request: Request, ctx: Ctx, user: User
) -> JSONResponse | EventStream:
    """`model` names an agent (GET /v1/models); `messages` are the whole conversation (nothing is stored)."""
    run = await start_chat_completion(
        ctx.deps,
        ctx.responses,
        body,
        user,
        now=request_now(request),
        public_base_url=link_base(request),
        deadline_ms=None if body.stream else ctx.settings.turn_deadline_ms,  # as the other buffered routes
    )
    if body.stream:
        return stream_frames(ctx, run.chunks(), run.encoder.sse)
    try:
        return JSONResponse(await run.completion())
    finally:
        await ctx.before_response()
