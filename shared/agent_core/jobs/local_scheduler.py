"""The schedules of the deployed system, run in-process by the local server (idle sessions every 5 minutes,
daily summaries hourly at :30), so local behaves like AWS without EventBridge."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta

from agent_core.container import RunDeps
from agent_core.jobs.handlers import ScheduledJob, ScheduledPass
from agent_core.observability import logger


def next_idle_run(now: datetime) -> datetime:
    """The next multiple of 5 minutes (UTC)."""
    base = now.replace(second=0, microsecond=0)
    return base + timedelta(minutes=5 - base.minute % 5)


def next_daily_run(now: datetime) -> datetime:
    """The next hh:30 (UTC)."""
    candidate = now.replace(minute=30, second=0, microsecond=0)
    return candidate if candidate > now else candidate + timedelta(hours=1)


NEXT_RUN: Mapping[ScheduledJob, Callable[[datetime], datetime]] = {
    "idle_sessions": next_idle_run,
    "daily_summary": next_daily_run,
}


async def _every(deps: RunDeps, name: str, job: ScheduledPass, next_run: Callable[[datetime], datetime]) -> None:
    while True:
        due = next_run(datetime.now(UTC))
        await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))
        try:
            report = await job(deps, due)
            logger.info("scheduled job", extra={"job": name, "enqueued": report.enqueued})
        except Exception:
            logger.exception("scheduled job failed", extra={"job": name})


@contextlib.asynccontextmanager
async def local_schedules(deps: RunDeps, passes: Mapping[ScheduledJob, ScheduledPass]) -> AsyncIterator[None]:
    """Run each of `passes` on its schedule while the local server is up."""
    tasks = [asyncio.create_task(_every(deps, name, job, NEXT_RUN[name])) for name, job in passes.items()]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
