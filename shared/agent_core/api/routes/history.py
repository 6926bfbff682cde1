"""Chat history for the /api/ap clients (chat function): the chat list and replay by run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import MAX_ID, iso
from agent_core.context import AppContext
from agent_core.domain.ids import now_ms
from agent_core.domain.models import Run
from agent_core.errors import NotFound
from agent_core.memory.calendar import id_ceiling, id_floor
from agent_core.memory.window import to_chat_message

router = APIRouter(prefix="/api/ap", tags=["history"], responses=error_responses(401, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


@router.get("/chats")
async def chats(
    ctx: Ctx, user: User, limit: Annotated[int, Query(ge=1, le=100)] = 20, cursor: str | None = None
) -> Any:
    page = await ctx.deps.chats.list_chats(user, limit, cursor)
    items = [
        {
            "chatId": c.chat_id,
            "chatName": c.title,
            "agentKey": c.agent_key,
            "createdAt": iso(c.created_at),
            "updatedAt": iso(c.last_activity_at),
        }
        for c in page.items
    ]
    return {"items": items, "nextCursor": page.next_cursor}


async def _raw_messages(ctx: AppContext, chat_id: str, runs: list[Run]) -> list[dict[str, Any]]:
    """The page's messages in OpenAI chat format: only the span its runs cover (ids sort by time)."""
    if not runs:
        return []
    first = min(r.started_at for r in runs)
    last = max(r.ended_at or now_ms() for r in runs)
    span = await ctx.deps.chats.messages_between(chat_id, id_floor(first), id_ceiling(last))
    run_ids = {r.run_id for r in runs}
    return [to_chat_message(m, tool_output_chars=1 << 30) for m in span if m.run_id in run_ids]


@router.get("/chat", responses=error_responses(404))
async def chat(
    ctx: Ctx,
    user: User,
    chat_id: Annotated[str, Query(alias="chatId", min_length=1, max_length=MAX_ID)],
    include_raw_messages: Annotated[bool, Query(alias="includeRawMessages")] = False,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: str | None = None,
) -> Any:
    """The chat's runs, oldest first, as replay events (snapshot granularity); paged by run."""
    record = await ctx.deps.chats.get_chat(chat_id, user)
    if record is None:
        raise NotFound("chat not found", param="chatId", code="chat_not_found")
    runs, next_cursor = await ctx.deps.turns.list_runs(chat_id, limit, cursor)
    events: list[dict[str, Any]] = []
    for run in runs:
        events += run.snapshot or []  # read back whole by the store, wherever it keeps it
    body: dict[str, Any] = {"chatId": chat_id, "chatName": record.title, "events": events, "nextCursor": next_cursor}
    if include_raw_messages:
        body["rawMessages"] = await _raw_messages(ctx, chat_id, runs)
    return ctx.deps.data_links.refresh(body, chat_id)  # stored links expire: each read signs them afresh
