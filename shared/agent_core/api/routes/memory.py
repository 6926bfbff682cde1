"""Long-term memory over HTTP (chat function): search the caller's memory records; import a past conversation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import Body
from agent_core.context import AppContext
from agent_core.errors import InvalidRequest, ServiceUnavailable
from agent_core.memory.calendar import to_ms
from agent_core.memory.long_term import LongTermMemory
from agent_core.memory.retrieval import SearchQuery
from agent_core.runtime.chat_import import ImportedMessage, import_chat

router = APIRouter(prefix="/api/ap", tags=["memory"], responses=error_responses(401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


def _ms(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    return to_ms(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def _memory(ctx: AppContext) -> LongTermMemory:
    if ctx.deps.memory is None:
        raise ServiceUnavailable("long-term memory is not configured")
    return ctx.deps.memory


class MemorySearch(Body):
    query: str = Field(min_length=1, max_length=4000)
    limit: int = Field(20, ge=1, le=100)
    max_tokens: int | None = Field(None, ge=1, le=100_000)
    start: datetime | None = None  # ISO 8601 (a date, or a time; UTC when it names no offset): inclusive
    end: datetime | None = None  # exclusive


class RecordOut(Body):
    kind: str
    text: str
    chat_id: str
    message_ids: list[str]
    at: int  # epoch ms of the record's first message
    score: float


class MemorySearchOut(Body):
    records: list[RecordOut]
    tokens: int  # the runtime's estimate (llm/tokens.py) of the records' texts


@router.post("/memory/search", response_model=MemorySearchOut, responses=error_responses(413, 422, 503))
async def search_memory(body: MemorySearch, ctx: Ctx, user: User) -> Any:
    """The caller's most relevant memory records (never another user's), best first, within `limit` and
    `maxTokens`: records stop before the budget would be exceeded."""
    start, end = _ms(body.start), _ms(body.end)
    if start is not None and end is not None and end <= start:
        raise InvalidRequest("end must be after start", param="end", code="invalid_range")
    query = SearchQuery(body.query, limit=body.limit, max_tokens=body.max_tokens, start=start, end=end)
    hits, tokens = await _memory(ctx).search(user, query)
    records = [
        RecordOut(
            kind=h.record.kind.value,
            text=h.record.text,
            chat_id=h.record.chat_id,
            message_ids=h.record.message_ids,
            at=h.record.at,
            score=round(h.score, 6),
        )
        for h in hits
    ]
    return MemorySearchOut(records=records, tokens=tokens).model_dump(by_alias=True)


class ImportMessageIn(Body):
    role: Literal["user", "assistant"]
    content: str
    created_at: datetime  # ISO 8601; UTC when it names no offset


class ChatImport(Body):
    title: str = Field("", max_length=200)
    agent_key: str | None = Field(None, max_length=128)
    messages: list[ImportMessageIn]


class ChatImportOut(Body):
    chat_id: str
    message_ids: list[str]


@router.post(
    "/chats/import", status_code=201, response_model=ChatImportOut, responses=error_responses(400, 404, 413, 422)
)
async def import_conversation(body: ChatImport, ctx: Ctx, user: User) -> Any:
    """Import a past conversation (up to 2,000 messages, in order, each with its own time): stored as a chat
    whose session is over, then summarised and made searchable in the background like any chat."""
    messages = [ImportedMessage(m.role, m.content, _ms(m.created_at) or 0) for m in body.messages]
    chat, stored = await import_chat(ctx.deps, user, body.title, body.agent_key, messages)
    await ctx.before_response()
    out = ChatImportOut(chat_id=chat.chat_id, message_ids=[m.id for m in stored])
    return JSONResponse(out.model_dump(by_alias=True), status_code=201)
