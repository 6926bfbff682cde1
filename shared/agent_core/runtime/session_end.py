"""Ending a session on request (POST /api/ap/chat/{chatId}/end)."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import SessionSummaryJob
from agent_core.domain.models import Chat


async def end_session(deps: RunDeps, chat: Chat, at_ms: int) -> SessionSummaryJob | None:
    """Close the chat's open session now (POST /api/ap/chat/{chatId}/end); None when none was open."""
    if chat.session_id is None:
        return None
    job = SessionSummaryJob(
        chat_id=chat.chat_id,
        user_id=chat.user_id,
        session_id=chat.session_id,
        started_at=chat.session_started_at or chat.last_activity_at,
        ended_at=max(chat.last_activity_at, chat.session_started_at or 0),
    )
    # Enqueue first, close after: a queue failure leaves the session open (the caller's retry, or the idle
    # pass, ends it). A job enqueued for a session another closer got first is summarised once (idempotent).
    await deps.work_queue.enqueue(job)
    return job if await deps.memory_store.close_session(chat.chat_id, chat.session_id) else None
