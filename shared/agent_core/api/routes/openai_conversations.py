"""The OpenAI Conversations API (stream function): /v1/conversations... over our chats (one object)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import PathId
from agent_core.context import AppContext
from agent_core.domain.ids import new_chat_id, now_ms, sortable_id
from agent_core.domain.models import Chat, Message, Role, WaitKind
from agent_core.domain.text import chat_name
from agent_core.errors import NotFound
from agent_core.runtime.chat_deletion import delete_chat_completely
from agent_core.wires.input import ParsedInput, WireModel, parse_input
from agent_core.wires.responses.items import ListQuery, conversation_items, list_page, unanswered_calls
from agent_core.wires.responses.request import Metadata
from agent_core.wires.turn import to_message

router = APIRouter(prefix="/v1/conversations", tags=["openai-conversations"], responses=error_responses(400, 401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
PAGE = 100


class ConversationCreate(WireModel):
    items: list[dict[str, Any]] = Field(default_factory=list, max_length=20)
    metadata: Metadata | None = None


class ConversationUpdate(WireModel):
    metadata: Metadata


class ItemsCreate(WireModel):
    items: list[dict[str, Any]] = Field(min_length=1, max_length=20)


def _not_found(conversation_id: str) -> NotFound:
    message = f"conversation {conversation_id!r} not found"
    return NotFound(message, param="conversation_id", code="conversation_not_found")


async def _chat(ctx: AppContext, conversation_id: str, user: str) -> Chat:
    chat = await ctx.deps.chats.get_chat(conversation_id, user)
    if chat is None:
        raise _not_found(conversation_id)
    return chat


def _conversation(chat: Chat, metadata: dict[str, str]) -> dict[str, Any]:
    return {"id": chat.chat_id, "object": "conversation", "created_at": chat.created_at // 1000, "metadata": metadata}


async def _add(ctx: AppContext, chat: Chat, parsed: ParsedInput) -> list[Message]:
    at = now_ms()
    messages = [to_message(m, chat.chat_id, at) for m in parsed.messages]
    if messages:
        await ctx.deps.chats.add_messages(chat.chat_id, messages)
    return messages


async def _all_messages(ctx: AppContext, chat: Chat, user: str) -> list[Message]:
    found: list[Message] = []
    cursor: str | None = None
    while True:
        page = await ctx.deps.chats.list_messages(chat.chat_id, user, PAGE, cursor)
        if page is None:
            raise _not_found(chat.chat_id)
        found += page.items
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def _asked(ctx: AppContext, messages: list[Message]) -> frozenset[str]:
    """The calls without a result that wait for an approval (their WAIT item is one): read for those only."""
    waits = [await ctx.deps.waits.get_wait(run_id, call_id) for run_id, call_id in unanswered_calls(messages)]
    return frozenset(w.tool_id for w in waits if w is not None and w.kind == WaitKind.APPROVAL)


@router.post("", responses=error_responses(413))
async def create_conversation(ctx: Ctx, user: User, body: ConversationCreate | None = None) -> dict[str, Any]:
    body = body or ConversationCreate()
    parsed = parse_input(body.items, sortable_id(), ctx.settings.max_message_bytes)
    metadata = body.metadata or {}
    first = next((m.content for m in parsed.messages if m.role == Role.USER), "")
    at = now_ms()
    chat = Chat(
        chat_id=new_chat_id(),
        user_id=user,
        title=metadata.get("title") or chat_name(first),
        created_at=at,
        last_activity_at=at,
    )
    await ctx.deps.chats.create_chat(chat)
    if metadata:
        await ctx.responses.put_conversation(chat.chat_id, metadata)
    await _add(ctx, chat, parsed)
    return _conversation(chat, metadata)


@router.get("/{conversation_id}", responses=error_responses(404))
async def retrieve_conversation(conversation_id: PathId, ctx: Ctx, user: User) -> dict[str, Any]:
    chat = await _chat(ctx, conversation_id, user)
    return _conversation(chat, await ctx.responses.conversation_metadata(chat.chat_id))


@router.post("/{conversation_id}", responses=error_responses(404, 413))
async def update_conversation(
    conversation_id: PathId, body: ConversationUpdate, ctx: Ctx, user: User
) -> dict[str, Any]:
    chat = await _chat(ctx, conversation_id, user)
    await ctx.responses.put_conversation(chat.chat_id, body.metadata)
    return _conversation(chat, body.metadata)


@router.delete("/{conversation_id}", responses=error_responses(404))
async def delete_conversation(conversation_id: PathId, ctx: Ctx, user: User) -> dict[str, Any]:
    if not await delete_chat_completely(ctx.deps.chats, ctx.deps.blobs, conversation_id, user):
        raise _not_found(conversation_id)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@router.get("/{conversation_id}/items", responses=error_responses(404))
async def list_items(
    conversation_id: PathId,
    ctx: Ctx,
    user: User,
    query: Annotated[ListQuery, Query()],
) -> dict[str, Any]:
    chat = await _chat(ctx, conversation_id, user)
    messages = await _all_messages(ctx, chat, user)
    items = conversation_items(messages, chat.agent_key, await _asked(ctx, messages))
    return ctx.deps.data_links.refresh(list_page(items, query), chat.chat_id)  # stored links signed afresh


@router.post("/{conversation_id}/items", responses=error_responses(404, 413))
async def create_items(conversation_id: PathId, body: ItemsCreate, ctx: Ctx, user: User) -> dict[str, Any]:
    parsed = parse_input(body.items, sortable_id(), ctx.settings.max_message_bytes)  # checked before any read
    chat = await _chat(ctx, conversation_id, user)
    messages = await _add(ctx, chat, parsed)
    return list_page(conversation_items(messages, chat.agent_key), ListQuery(limit=PAGE, order="asc"))
