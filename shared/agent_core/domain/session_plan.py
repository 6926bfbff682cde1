"""What a turn does to its chat's session and its user's day (decided in memory/, written by store/)."""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.domain.jobs import SessionSummaryJob

DAYMARK_TTL_S = 3 * 24 * 3600


@dataclass(frozen=True)
class DayMark:
    """Written once per user-day; indexed under the UTC hour (`bucket`, yyyymmddhh) in which the day closes."""

    user_id: str
    date: str
    close_ms: int
    bucket: str
    shard: int


@dataclass(frozen=True)
class SessionPlan:
    """Decided from META before the turn's one write; the write is conditional on `expected_session_id`."""

    expected_session_id: str | None
    open_session_id: str | None = None
    idle_due_ms: int | None = None
    chat_shard: int = 0
    close: SessionSummaryJob | None = None  # a stale session this turn ends
    daymark: DayMark | None = None
