"""The native conversation API: /api/v1/conversations (buffered; the chat function)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from agent_core.api.deps import app_context, current_user, link_base, request_now, request_timezone
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import (
    ChatIn,
    ChatOut,
    ConversationList,
    ConversationOut,
    CreateConversation,
    MessageList,
    MessageOut,
    PathId,
)
from agent_core.context import AppContext
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.models import Chat
from agent_core.errors import NotFound
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.chat_deletion import delete_chat_completely
from agent_core.runtime.turn import TurnRequest

router = APIRouter(prefix="/api/v1/conversations", tags=["conversations"], responses=error_responses(401, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
Limit = Annotated[int, Query(ge=1, le=100)]


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True)


def _not_found() -> NotFound:
    return NotFound("conversation not found", param="conversationId", code="conversation_not_found")


@router.post("", status_code=201, responses=error_responses(413))
async def create_conversation(ctx: Ctx, user: User, body: CreateConversation | None = None) -> JSONResponse:
    at = now_ms()
    chat = Chat(
        chat_id=new_chat_id(),
        user_id=user,
        title=(body.title if body else "").strip(),
        created_at=at,
        last_activity_at=at,
    )
    await ctx.deps.chats.create_chat(chat)
    out = ConversationOut.of(chat)
    return JSONResponse(
        {"conversationId": out.conversation_id, "title": out.title, "createdAt": out.created_at}, status_code=201
    )


@router.get("")
async def list_conversations(ctx: Ctx, user: User, limit: Limit = 20, cursor: str | None = None) -> Any:
    page = await ctx.deps.chats.list_chats(user, limit, cursor)
    return _dump(ConversationList(items=[ConversationOut.of(c) for c in page.items], next_cursor=page.next_cursor))


@router.get("/{conversation_id}", responses=error_responses(404))
async def get_conversation(conversation_id: PathId, ctx: Ctx, user: User) -> Any:
    chat = await ctx.deps.chats.get_chat(conversation_id, user)
    if chat is None:
        raise _not_found()
    return _dump(ConversationOut.of(chat))


@router.delete("/{conversation_id}", status_code=204, responses=error_responses(404))
async def delete_conversation(conversation_id: PathId, ctx: Ctx, user: User) -> Response:
    if not await delete_chat_completely(ctx.deps.chats, ctx.deps.blobs, conversation_id, user):
        raise _not_found()
    return Response(status_code=204)


@router.get("/{conversation_id}/messages", responses=error_responses(404))
async def list_messages(
    conversation_id: PathId, ctx: Ctx, user: User, limit: Limit = 50, cursor: str | None = None
) -> Any:
    page = await ctx.deps.chats.list_messages(conversation_id, user, limit, cursor)
    if page is None:
        raise _not_found()
    listing = _dump(MessageList(items=[MessageOut.of(m) for m in page.items], next_cursor=page.next_cursor))
    return ctx.deps.data_links.refresh(listing, conversation_id)  # stored links expire: signed afresh on each read


@router.post("/{conversation_id}/chat", responses=error_responses(400, 404, 409, 413, 502, 503, 504))
async def chat(
    conversation_id: PathId,
    body: ChatIn,
    request: Request,
    ctx: Ctx,
    user: User,
    x_request_id: Annotated[str | None, Header(max_length=128)] = None,
) -> Any:
    turn = TurnRequest(
        user_id=user,
        chat_id=conversation_id,
        message=body.message,
        request_id=body.request_id or x_request_id,
        model=body.model,
        deadline_ms=ctx.settings.turn_deadline_ms,
        now=request_now(request),
        public_base_url=link_base(request),
        timezone=request_timezone(request, body.timezone),
        chat_param="conversationId",
    )
    try:
        result = await run_blocking(ctx.deps, turn)
    finally:
        # Nothing runs after a Lambda response: background work overlaps the turn, then is awaited.
        await ctx.before_response()
    answer = _dump(
        ChatOut(
            request_id=result.request_id,
            assistant_message=result.assistant_message,
            tool_calls=result.tool_calls,
            finish_reason=result.finish_reason,
        )
    )
    return ctx.deps.data_links.refresh(answer, conversation_id)  # a retried request's stored result: fresh links
