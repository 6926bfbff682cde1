"""Glue for the job entry points: the worker and scheduled Lambdas, the `agent-core jobs` CLI, the dev routes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict
from datetime import UTC, date, datetime
from typing import Any, Literal, TypeVar

from agent_core.config import get_settings
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import DailySummaryJob
from agent_core.jobs import scheduled
from agent_core.jobs.handlers import JobHandlers
from agent_core.jobs.inprocess import JobHandler
from agent_core.jobs.scheduled import JobReport
from agent_core.jobs.worker import process_batch
from agent_core.memory.calendar import to_ms
from agent_core.observability import logger

ScheduledJob = Literal["idle_sessions", "daily_summary"]
Progress = Callable[[int, int, str], None]  # (done, total, label)
T = TypeVar("T")

_lock = threading.Lock()
_context: AppContext | None = None
_handler: JobHandler | None = None
_loop: asyncio.AbstractEventLoop | None = None


def job_handler(ctx: AppContext) -> JobHandler:
    """What the worker runs for each job: the context's deps' JobHandlers (queue re-sends go to deps.queue)."""
    return JobHandlers(ctx.deps).handle


def lambda_context() -> AppContext:
    """The process's AppContext (and job handler), built once on first use from the environment's Settings."""
    global _context, _handler
    if _context is None:
        with _lock:
            if _context is None:
                context = build_context(get_settings())
                _handler = job_handler(context)
                _context = context
    return _context


def reset() -> None:
    """Forget the cached context (tests, after changing the environment)."""
    global _context, _handler
    with _lock:
        _context, _handler = None, None


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on this process's loop, kept across invocations (the cached clients stay bound to it)."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(coro)


def scheduled_time(event: dict[str, Any] | None) -> datetime:
    """The schedule's `scheduledTime` (ISO 8601, UTC when it has no offset), else the current time."""
    raw = (event or {}).get("scheduledTime")
    if isinstance(raw, str) and raw:
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            logger.warning("scheduledTime is not ISO 8601; using the current time", extra={"scheduledTime": raw})
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.now(UTC)


def report_dict(report: JobReport) -> dict[str, Any]:
    return asdict(report)


async def run_scheduled(ctx: AppContext, name: ScheduledJob, now: datetime, user_id: str | None = None) -> JobReport:
    """Run one scheduled pass at `now` (over `user_id`'s data only, if given), then wait for the in-process
    work it enqueued (none when on SQS)."""
    job = getattr(scheduled, f"run_{name}")  # looked up per call: tests replace these functions
    report: JobReport = await (job(ctx.deps, now) if user_id is None else job(ctx.deps, now, user_id))
    await ctx.queue.join()
    return report


async def consume(ctx: AppContext, event: dict[str, Any], handle: JobHandler | None = None) -> dict[str, Any]:
    """One SQS batch: the partial batch response, after any in-process follow-up work has finished."""
    response = await process_batch(event, handle or job_handler(ctx))
    await ctx.queue.join()
    return response


async def enqueue_daily_summaries(
    ctx: AppContext, user_id: str, dates: Sequence[date], now: datetime | None = None, progress: Progress | None = None
) -> int:
    """Enqueue one DailySummaryJob per date for `user_id`, one at a time, waiting for each; returns the count."""
    now_ms = to_ms(now) if now is not None else None
    for done, day in enumerate(dates, start=1):
        await ctx.deps.queue.enqueue(DailySummaryJob(user_id=user_id, date=day.isoformat(), now_ms=now_ms))
        await ctx.queue.join()
        if progress is not None:
            progress(done, len(dates), day.isoformat())
    return len(dates)


def handle_sqs(event: dict[str, Any]) -> dict[str, Any]:
    """The worker Lambda: an SQS batch event in, `{"batchItemFailures": [...]}` out (never raises)."""
    ctx = lambda_context()
    return run(consume(ctx, event, _handler))


def handle_schedule(name: ScheduledJob, event: dict[str, Any]) -> dict[str, Any]:
    """A scheduled Lambda: EventBridge Scheduler's `{"scheduledTime": ...}` in, the JobReport as a dict out."""
    now = scheduled_time(event)
    report = run(run_scheduled(lambda_context(), name, now))
    result = report_dict(report)
    logger.info("scheduled job done", extra={"job": name, "now": now.isoformat(), **result})
    return result
