"""Sessions: a chat's stretch of activity, closed after the idle timeout (or explicitly), then summarised."""

from __future__ import annotations

from datetime import date
from zoneinfo import ZoneInfo

from agent_core.domain.ids import base36
from agent_core.domain.jobs import SessionSummaryJob
from agent_core.domain.models import Chat, Message, Role, SessionSummary
from agent_core.domain.session_plan import DayMark, SessionPlan
from agent_core.memory.calendar import close_bucket, day_bounds, local_date
from agent_core.store.schema import SHARDS, shard


def new_session_id(at_ms: int) -> str:
    return f"s{base36(at_ms, 9)}"


def daymark_for(user_id: str, day: date, tz: ZoneInfo) -> DayMark:
    _, close_ms = day_bounds(day, tz)
    return DayMark(
        user_id=user_id,
        date=day.isoformat(),
        close_ms=close_ms,
        bucket=close_bucket(close_ms),
        shard=shard(user_id, SHARDS),
    )


def plan_session(chat: Chat, at_ms: int, tz: ZoneInfo, idle_ms: int, *, new_chat: bool = False) -> SessionPlan:
    """Keep the open session, or open one (ending a stale one); mark the user-day when it is new."""
    current = chat.session_id
    today = local_date(at_ms, tz)
    stale = current is not None and chat.last_activity_at + idle_ms <= at_ms
    close = None
    if stale and current is not None:
        close = SessionSummaryJob(
            chat_id=chat.chat_id,
            user_id=chat.user_id,
            session_id=current,
            started_at=chat.session_started_at or chat.last_activity_at,
            ended_at=chat.last_activity_at,
        )
    opening = current is None or stale
    first_today = new_chat or opening or local_date(chat.last_activity_at, tz) != today
    return SessionPlan(
        expected_session_id=current,
        open_session_id=new_session_id(at_ms) if opening else None,
        idle_due_ms=at_ms + idle_ms if opening else None,
        chat_shard=shard(chat.chat_id, SHARDS),
        close=close,
        daymark=daymark_for(chat.user_id, today, tz) if first_today else None,
    )


MIN_USER_MESSAGES = 2
MIN_CHARS = 80


def too_little(messages: list[Message]) -> bool:
    """Sessions with too little content are marked done without an LLM call."""
    users = [m for m in messages if m.role == Role.USER]
    return len(users) < MIN_USER_MESSAGES and sum(len(m.content) for m in users) < MIN_CHARS


def told(sessions: list[SessionSummary]) -> list[SessionSummary]:
    """The sessions whose summary tells their messages (a skipped session tells nothing)."""
    return [s for s in sessions if not s.skipped and s.summary.strip()]


def covered(message: Message, sessions: list[SessionSummary]) -> bool:
    """Whether one of these summarised sessions spans the message (its summary already tells it)."""
    return any(s.started_at <= message.created_at <= s.ended_at for s in sessions)
