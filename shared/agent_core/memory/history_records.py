"""Recall for time queries: the precomputed daily summaries of a range, with bounded fallbacks, no LLM call."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from zoneinfo import ZoneInfo

from agent_core.domain.models import Chat, Kind, Message, SessionSummary
from agent_core.memory.calendar import day_bounds, id_ceiling, id_floor
from agent_core.memory.session_rules import covered, told
from agent_core.memory.summarize import transcript
from agent_core.memory.time_query import TimeRange
from agent_core.store.base import MemoryReader

RAW_PER_DAY = 40
DETAIL_MESSAGES = 120
MAX_DAYS = 62


@dataclass
class Recall:
    """What the records say about a range, ready for one prompt."""

    days: list[str] = field(default_factory=list)  # one block per day that has records
    dates: list[date] = field(default_factory=list)  # those days
    details: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.days

    def text(self) -> str:
        out = "\n\n".join(self.days)
        if self.details:
            out += "\n\nExact messages from that time:\n" + "\n".join(self.details)
        return out


async def recall(store: MemoryReader, user_id: str, span: TimeRange, tz: ZoneInfo, *, detail: bool) -> Recall:
    """Daily summaries first; for days without one, session summaries, else raw messages (bounded).

    A `latest` span (上次, "last time") gives only its most recent day with records (looked for newest first).
    """
    start = max(span.start, span.end - timedelta(days=MAX_DAYS - 1))
    summaries = {d.date: d for d in await store.daily_range(user_id, start.isoformat(), span.end.isoformat())}
    range_start_ms, _ = day_bounds(start, tz)
    chats = await store.chats_active_since(user_id, range_start_ms)
    result = Recall()
    days = [start + timedelta(days=n) for n in range((span.end - start).days + 1)]
    for day in reversed(days) if span.latest else days:
        key = day.isoformat()
        if key in summaries:
            topics = ", ".join(summaries[key].key_topics)
            result.days.append(f"{key} (topics: {topics}):\n{summaries[key].summary}")
        else:
            block = await _fallback(store, chats, day, tz)
            if not block:
                continue
            result.days.append(f"{key}:\n{block}")
        result.dates.append(day)
        if span.latest:
            break
    if detail and result.dates:
        result.details = await _raw_lines(store, chats, min(result.dates), max(result.dates), tz, DETAIL_MESSAGES)
    return result


async def _fallback(store: MemoryReader, chats: list[Chat], day: date, tz: ZoneInfo) -> str:
    """A day without a daily summary (today, or not yet summarised): its session summaries, then the messages
    none of them tells (skipped short sessions, open ones, a session's part after midnight), bounded."""
    key = day.isoformat()
    sessions = told([s for c in chats for s in await store.list_sessions(c.chat_id) if s.local_date == key])
    lines = [f"- {s.summary}" for s in sessions]
    lines += await _raw_lines(store, chats, day, day, tz, RAW_PER_DAY, told_by=sessions)
    return "\n".join(lines)


async def _raw_lines(
    store: MemoryReader,
    chats: list[Chat],
    first: date,
    last: date,
    tz: ZoneInfo,
    limit: int,
    told_by: list[SessionSummary] | None = None,
) -> list[str]:
    """The messages of the days, the last `limit`, as transcript lines; without those `told_by` summaries."""
    start_ms, _ = day_bounds(first, tz)
    _, end_ms = day_bounds(last, tz)
    found: list[Message] = []
    for chat in chats:
        messages = await store.messages_between(chat.chat_id, id_floor(start_ms), id_ceiling(end_ms - 1))
        found += [m for m in messages if m.kind == Kind.NORMAL and m.content and not covered(m, told_by or [])]
    found.sort(key=lambda m: m.id)
    return transcript(found[-limit:], max_chars_per_message=400).splitlines()
