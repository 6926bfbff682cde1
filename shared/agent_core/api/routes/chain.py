"""POST /api/chat/stream: the stateless chain endpoint; native SSE with an ephemeral chat; nothing stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.routes.stream import PING_INTERVAL_S, SSE_HEADERS
from agent_core.api.schemas import Body
from agent_core.context import AppContext
from agent_core.domain.models import Role
from agent_core.domain.text import utf8_size
from agent_core.errors import InvalidRequest, PayloadTooLarge
from agent_core.protocol.sse import encode_sse, with_pings
from agent_core.runtime.ephemeral import ephemeral_deps, seed_chat
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn, validate_message

router = APIRouter(prefix="/api/chat", tags=["chain"], responses=error_responses(401, 413, 422))


class ChainMessage(Body):
    role: Literal["user", "assistant", "system"]
    content: str


class ChainIn(Body):
    messages: list[ChainMessage] = Field(min_length=1)  # at most AGENT_MAX_INPUT_ITEMS, each AGENT_MAX_MESSAGE_BYTES
    agent_name: str | None = Field(None, max_length=64)
    strategy: Literal["prompt", "function"] | None = None
    react_verbose: bool | None = None


@router.post("/stream", response_class=EventStreamResponse, responses=error_responses(404))
async def chain_stream(
    body: ChainIn, ctx: Annotated[AppContext, Depends(app_context)], user: Annotated[str, Depends(current_user)]
) -> StreamingResponse:
    settings = ctx.settings
    if len(body.messages) > settings.max_input_items:
        raise InvalidRequest(
            f"messages has more than {settings.max_input_items} items", param="messages", code="too_many_items"
        )
    for n, message in enumerate(body.messages[:-1]):  # the last one is checked as the turn's message
        if utf8_size(message.content, f"messages[{n}].content") > settings.max_message_bytes:
            raise PayloadTooLarge(
                f"message exceeds {settings.max_message_bytes} bytes (UTF-8)", param=f"messages[{n}].content"
            )
    if body.messages[-1].role != "user":
        raise InvalidRequest("the last message must be the user's", param="messages")
    validate_message(body.messages[-1].content, settings.max_message_bytes)
    agent = ctx.deps.agents.get(body.agent_name)
    changes: dict[str, object] = {}
    if body.strategy is not None:
        changes["mode"] = "react" if body.strategy == "prompt" else "function"
    if body.react_verbose is not None:
        changes["react_verbose"] = body.react_verbose
    deps = ephemeral_deps(ctx.deps, agent.model_copy(update=changes))
    history = [(Role(m.role.upper()), m.content) for m in body.messages[:-1]]
    chat = await seed_chat(deps, user, agent.key, history)
    request = TurnRequest(user_id=user, chat_id=chat.chat_id, message=body.messages[-1].content)
    prepared = await prepare_turn(deps, request)
    assert isinstance(prepared, PreparedTurn)
    runner = TurnRunner(prepared)

    async def stream() -> AsyncIterator[bytes]:
        async for envelope in runner.events():
            yield encode_sse(envelope.wire())

    return StreamingResponse(with_pings(stream(), PING_INTERVAL_S), media_type="text/event-stream", headers=SSE_HEADERS)
