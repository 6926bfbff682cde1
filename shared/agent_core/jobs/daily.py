"""Daily summaries: find the user-days that closed, and summarise each (upsert), deferring active users."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from agent_core.container import RunDeps
from agent_core.domain.ids import now_ms
from agent_core.domain.jobs import DailySummaryJob, Job
from agent_core.domain.models import Chat, DailySummary, Kind, Message, Role, SessionSummary
from agent_core.jobs.job_run import job_run
from agent_core.jobs.memory_records import remember_day
from agent_core.jobs.report import JobReport
from agent_core.memory.calendar import close_bucket, day_bounds, id_ceiling, id_floor, to_ms, zone
from agent_core.memory.session_rules import covered, told
from agent_core.memory.summarize import summarise, transcript
from agent_core.observability import logger
from agent_core.store.base import MemoryReader
from agent_core.store.schema import SHARDS

ACTIVE_WINDOW_MS = 10 * 60_000
DEFER_S = 600
MAX_DEFERRALS = 6
RAW_MESSAGES_PER_CHAT = 60
# How far back each pass looks for user-days still not summarised (markers live DAYMARK_TTL_S, 3 days).
CATCH_UP_HOURS = 24
DAY_FALLBACK_CHARS = 4000


def pass_buckets(now: datetime) -> tuple[list[str], list[str]]:
    """(due, catch-up): the hour just past and this hour; then the CATCH_UP_HOURS before them, newest first."""
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    due = [close_bucket(to_ms(hour - timedelta(hours=h))) for h in (1, 0)]
    catch_up = [close_bucket(to_ms(hour - timedelta(hours=h))) for h in range(2, CATCH_UP_HOURS + 2)]
    return due, catch_up


async def run_daily_summary(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
    """The scheduled pass: enqueue one daily-summary job per user-day whose local day closed in the hours just
    past (and catch up). `user_id` limits the pass to that user's days (the dev route)."""
    with job_run("daily_summary") as report:
        return await enqueue_closed_days(deps, now, report, user_id)


async def enqueue_closed_days(deps: RunDeps, now: datetime, report: JobReport, user_id: str | None = None) -> JobReport:
    """At hh:30: the buckets of the hour just past and of this hour up to now (+05:30 and +05:45 zones), and
    the markers of earlier hours still not summarised (a failed or lost job): each pass catches up.
    With `user_id` (the dev route), that user's days only."""
    now_ms_ = to_ms(now)
    due, catch_up = pass_buckets(now)

    async def shard(bucket: str, index: int, late: bool) -> None:
        # Page by page: memory stays flat however many users closed their day in this hour. A done marker
        # leaves the index, so the catch-up reads only the stragglers.
        async for marks in deps.memory_store.day_mark_pages(bucket, index, now_ms_):
            page = [(u, d) for u, d in marks if user_id is None or u == user_id]
            jobs: list[Job] = [DailySummaryJob(user_id=u, date=d, now_ms=now_ms_) for u, d in page]
            report.scanned += len(page)
            if late:
                report.count("caught_up", len(page))
            try:
                await deps.work_queue.enqueue_many(jobs)
            except Exception as exc:
                # The markers stay undone: the next pass's catch-up enqueues them again.
                report.failed += len(jobs)
                logger.error("daily summaries not enqueued", extra={"jobs": len(jobs), "error": type(exc).__name__})
                continue
            report.enqueued += len(jobs)

    # The shards are independent partitions: read them concurrently.
    buckets = [(bucket, False) for bucket in due] + [(bucket, True) for bucket in catch_up]
    await asyncio.gather(*(shard(bucket, index, late) for bucket, late in buckets for index in range(SHARDS)))
    return report


@dataclass
class DayMaterial:
    """What a user-day holds: the summaries of the sessions filed under it, the messages none of them covers."""

    sessions: list[SessionSummary] = field(default_factory=list)  # summarised sessions filed under the day
    raw: list[Message] = field(default_factory=list)  # uncovered messages, the last RAW_MESSAGES_PER_CHAT a chat
    raw_count: int = 0  # every uncovered message (raw may hold fewer)
    filed: int = 0  # sessions filed under the day, skipped ones included
    active: list[Chat] = field(default_factory=list)


async def _day_material(memory: MemoryReader, chats: list[Chat], day: str, start_ms: int, end_ms: int) -> DayMaterial:
    """The day's session summaries, and its messages that no summary covers.

    A session is filed under its start day. A skipped session (too little to summarise) covers nothing, so
    its messages come raw; so do the messages of sessions not summarised yet, and those after midnight of
    a session filed under the day before (that day's summary tells them too, this day's once, raw).
    """
    found = DayMaterial()
    for chat in chats:
        messages = await memory.messages_between(chat.chat_id, id_floor(start_ms), id_ceiling(end_ms - 1))
        normal = [m for m in messages if m.kind == Kind.NORMAL]
        if not normal:
            continue
        found.active.append(chat)
        filed = [s for s in await memory.list_sessions(chat.chat_id) if s.local_date == day]
        summarised = told(filed)
        found.filed += len(filed)
        found.sessions += summarised
        uncovered = [m for m in normal if not covered(m, summarised)]
        found.raw_count += len(uncovered)
        found.raw += uncovered[-RAW_MESSAGES_PER_CHAT:]
    return found


async def _day_text(deps: RunDeps, found: DayMaterial) -> tuple[str, list[str]]:
    """The day's summary and topics: one session's as it is, else summarised; never empty over real messages."""
    sessions, raw = found.sessions, found.raw
    if len(sessions) == 1 and not raw:
        return sessions[0].summary, sessions[0].key_topics  # one session: reuse it, no LLM call
    parts = [f"Session summary ({s.local_date}): {s.summary}" for s in sessions]
    if raw:
        parts.append("Messages not summarised in a session:\n" + transcript(raw, max_chars_per_message=500))
    result = await summarise(deps.llm, deps.settings.model, "\n\n".join(parts), kind="daily")
    if result.summary.strip():
        return result.summary, result.key_topics
    # The model gave nothing: the material itself is the day's record (what was said, not an empty day).
    logger.warning("empty daily summary: storing the day's material instead")
    return "\n\n".join(parts)[:DAY_FALLBACK_CHARS], result.key_topics


async def last_active(store: MemoryReader, user_id: str, at_ms: int) -> int | None:
    """When the user was last active in the ACTIVE_WINDOW_MS before `at_ms`; None when quiet. While active, a
    daily-summary job waits (DEFER_S at a time, MAX_DEFERRALS times)."""
    recent = await store.chats_active_since(user_id, at_ms - ACTIVE_WINDOW_MS)
    return max((c.last_activity_at for c in recent if c.last_activity_at <= at_ms), default=None)


def forced(job: DailySummaryJob) -> DailySummaryJob:
    """The job with its deferrals spent: it summarises at once, even while the user is active."""
    return job.model_copy(update={"deferrals": MAX_DEFERRALS})


async def summarize_day(deps: RunDeps, job: DailySummaryJob) -> bool:
    """Upsert the user's day summary and write it into each chat active that day. False: nothing written."""
    memory = deps.memory_store
    if await memory.is_day_done(job.user_id, job.date):
        return False
    now_ms_ = job.now_ms or now_ms()
    if job.deferrals < MAX_DEFERRALS and await last_active(memory, job.user_id, now_ms_) is not None:
        # The user is still talking: summarise later (a delayed message, not a failure).
        logger.info(
            "daily summary deferred: the user is active",
            extra={"userId": job.user_id, "date": job.date, "delayS": DEFER_S, "deferrals": job.deferrals + 1},
        )
        await deps.work_queue.enqueue(job.model_copy(update={"deferrals": job.deferrals + 1}), delay_s=DEFER_S)
        return False
    profile = await memory.get_profile(job.user_id)
    tz = zone(profile.timezone if profile else None, deps.settings.default_timezone)
    start_ms, end_ms = day_bounds(date.fromisoformat(job.date), tz)
    chats = await memory.chats_active_since(job.user_id, start_ms)
    found = await _day_material(memory, chats, job.date, start_ms, end_ms)
    if not found.active:
        logger.info("no activity that day", extra={"userId": job.user_id, "date": job.date})
        await memory.mark_day_done(job.user_id, job.date, now_ms_)
        return False
    text, topics = await _day_text(deps, found)
    day = DailySummary(
        user_id=job.user_id,
        date=job.date,
        summary=text,
        key_topics=topics[:5],
        session_count=max(found.filed, len(found.sessions), 1),
        message_count=sum(s.message_count for s in found.sessions) + found.raw_count,
        updated_at=now_ms_,
    )
    await remember_day(deps, day, start_ms)
    await memory.put_daily(day)
    for chat in found.active:
        await memory.put_daily_message(
            Message(
                id=f"DAY#{job.date}",
                chat_id=chat.chat_id,
                role=Role.SYSTEM,
                kind=Kind.DAILY_SUMMARY,
                content=text,
                created_at=end_ms - 1,
            )
        )
    await memory.mark_day_done(job.user_id, job.date, now_ms_)
    return True
