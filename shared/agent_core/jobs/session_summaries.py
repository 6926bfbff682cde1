"""Session summaries: the idle-sessions pass closes idle sessions (exactly once) and enqueues a summary job for
each; the job summarises the ended session, then queues profile facts."""

from __future__ import annotations

from datetime import datetime

from agent_core.container import RunDeps
from agent_core.domain.ids import now_ms as wall_ms
from agent_core.domain.jobs import Job, MemoryRecordsJob, ProfileJob, SessionSummaryJob
from agent_core.domain.models import Chat, Kind, SessionSummary
from agent_core.jobs.job_run import job_run
from agent_core.jobs.memory_records import remember_session
from agent_core.jobs.report import JobReport
from agent_core.memory.calendar import id_ceiling, id_floor, local_date, to_ms, zone
from agent_core.memory.session_rules import too_little
from agent_core.memory.summarize import summarise
from agent_core.observability import logger
from agent_core.runtime.interrupted import settle_interrupted_runs, waiting_runs
from agent_core.store.schema import SHARDS


class SummaryFailed(RuntimeError):
    """The model gave no usable summary: the job fails and the queue retries it."""


async def summarize_session(deps: RunDeps, job: SessionSummaryJob) -> bool:
    """Write the session's summary once (idempotent); then queue the profile extraction. False: nothing to do."""
    memory = deps.memory_store
    # The session's exchanges become memory records (a job of their own: idempotent, retried on its own).
    await deps.work_queue.enqueue(MemoryRecordsJob(chat_id=job.chat_id, user_id=job.user_id))
    if await memory.get_session(job.chat_id, job.session_id) is not None:
        return False
    chat = await deps.chats.get_chat(job.chat_id, job.user_id)
    if chat is None:
        logger.info("session summary dropped: the chat is gone", extra={"chatId": job.chat_id})
        return False
    profile = await memory.get_profile(job.user_id)
    tz = zone(profile.timezone if profile else None, deps.settings.default_timezone)
    span = await memory.messages_between(job.chat_id, id_floor(job.started_at), id_ceiling(job.ended_at))
    messages = [m for m in span if m.kind == Kind.NORMAL]
    session = SessionSummary(
        chat_id=job.chat_id,
        session_id=job.session_id,
        user_id=job.user_id,
        message_count=len(messages),
        local_date=local_date(job.started_at, tz).isoformat(),
        started_at=job.started_at,
        ended_at=job.ended_at,
    )
    if too_little(messages):
        session.skipped = True
        return await memory.put_session(session)
    result = await summarise(deps.llm, deps.settings.model, messages, kind="session")
    if not result.summary.strip():
        # Nothing is written, so the job fails and is retried (SQS redelivery), like an LLM error.
        raise SummaryFailed(f"empty session summary for {job.chat_id}/{job.session_id}")
    session.summary, session.key_topics = result.summary, result.key_topics
    await remember_session(deps, session, messages)  # before the summary: a retry finds it and writes it once
    written = await memory.put_session(session)
    if written:
        await deps.work_queue.enqueue(ProfileJob(chat_id=job.chat_id, user_id=job.user_id, session_id=job.session_id))
    return written


async def run_idle_sessions(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
    """The scheduled pass: close sessions idle past their due time (each exactly once) and settle runs whose
    lease expired as interrupted. `user_id` limits the pass to that user's chats (the dev route acts only on
    its caller's data)."""
    with job_run("idle_sessions") as report:
        return await close_idle_sessions(deps, now, report, user_id)


async def close_idle_sessions(deps: RunDeps, now: datetime, report: JobReport, user_id: str | None = None) -> JobReport:
    """Every shard of the idle index: close sessions past due (once), move the due of active ones, fail dead runs."""
    now_ms = to_ms(now)
    idle_ms = deps.settings.idle_timeout_minutes * 60_000
    lease_now = min(now_ms, wall_ms())  # a pass "in the future" (--now, X-Agent-Now) expires no live lease
    waiting = waiting_runs(deps)  # a dead run waiting on people is continued once answered, not settled
    settled = await settle_interrupted_runs(
        deps.turns, lease_now, expired_before=lease_now, user_id=user_id, waiting=waiting
    )
    if settled:
        report.count("runs_failed", settled)
    for index in range(SHARDS):
        async for page in deps.memory_store.idle_candidate_pages(index, now_ms):
            mine = [c for c in page if user_id is None or c.user_id == user_id]
            await _close_page(deps, mine, now_ms, idle_ms, report)
    return report


async def _close_page(deps: RunDeps, page: list[Chat], now_ms: int, idle_ms: int, report: JobReport) -> None:
    due: list[SessionSummaryJob] = []
    for chat in page:
        report.scanned += 1
        if chat.session_id is None:
            continue
        due_ms = chat.last_activity_at + idle_ms
        if due_ms > now_ms:
            await deps.memory_store.move_idle_due(chat.chat_id, chat.session_id, due_ms)
            report.skipped += 1
            continue
        due.append(
            SessionSummaryJob(
                chat_id=chat.chat_id,
                user_id=chat.user_id,
                session_id=chat.session_id,
                started_at=chat.session_started_at or chat.last_activity_at,
                ended_at=chat.last_activity_at,
            )
        )
    if not due:
        return
    # Enqueue first, close after: a queue failure leaves the sessions open and due, so the next pass finds
    # them again. The summary job is idempotent, so a session enqueued twice is summarised once.
    jobs: list[Job] = list(due)
    try:
        await deps.work_queue.enqueue_many(jobs)
    except Exception as exc:
        report.failed += len(due)
        logger.error(
            "session summaries not enqueued: the sessions stay open for the next pass",
            extra={"sessions": len(due), "error": type(exc).__name__},
        )
        return
    report.enqueued += len(due)
    for job in due:
        if await deps.memory_store.close_session(job.chat_id, job.session_id):
            report.count("closed")
