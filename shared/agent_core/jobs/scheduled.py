"""The scheduled jobs' entry logic: find the work due at `now` and enqueue it (no Scan, bounded queries)."""

from __future__ import annotations

from datetime import datetime

from agent_core.container import RunDeps
from agent_core.jobs.job_run import job_run
from agent_core.jobs.report import JobReport

__all__ = ["JobReport", "run_daily_summary", "run_idle_sessions"]


async def run_idle_sessions(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
    """Close sessions idle past their due time (each exactly once) and fail runs whose lease expired.

    `user_id` limits the pass to that user's chats (the dev route acts only on its caller's data).
    """
    from agent_core.jobs.session_summaries import close_idle_sessions

    with job_run("idle_sessions") as report:
        return await close_idle_sessions(deps, now, report, user_id)


async def run_daily_summary(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
    """Enqueue one daily-summary job per user-day whose local day closed in the hours just past (and catch up).

    `user_id` limits the pass to that user's days (the dev route)."""
    from agent_core.jobs.daily import enqueue_closed_days

    with job_run("daily_summary") as report:
        return await enqueue_closed_days(deps, now, report, user_id)
