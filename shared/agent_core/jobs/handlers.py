"""What the app runs: one handler per job type, and the scheduled passes by name.

The composition root builds the `{job type: handler}` map once (these, plus the background /v1/responses runs)
and binds it to the app's deps in a `JobRunner`: the in-process queue and the SQS worker both run jobs through
that one runner. Every handler is idempotent; an exception means "retry" (SQS redelivers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from agent_core.container import RunDeps
from agent_core.domain.jobs import (
    CompactJob,
    ContinueRunJob,
    DailySummaryJob,
    Job,
    MemoryRecordsJob,
    ProfileJob,
    SessionSummaryJob,
    UsageJob,
)
from agent_core.jobs.compaction import compact_chat
from agent_core.jobs.continuation import continue_waiting_run
from agent_core.jobs.daily import run_daily_summary, summarize_day
from agent_core.jobs.memory_records import index_chat
from agent_core.jobs.profile import extract_profile
from agent_core.jobs.report import JobReport
from agent_core.jobs.session_summaries import run_idle_sessions, summarize_session
from agent_core.jobs.usage import record_usage, run_metered
from agent_core.tracing import job_span

Handler = Callable[[RunDeps, Any], Awaitable[bool | None]]
"""One job type's body: True when it wrote something (a summary, a profile), False when there was nothing to do."""

HandlerMap = Mapping[type, Handler]
"""`{job type: handler}`: the job's class, e.g. `CompactJob`, to the body that runs it."""

JOB_HANDLERS: HandlerMap = {
    CompactJob: compact_chat,
    SessionSummaryJob: summarize_session,
    ProfileJob: extract_profile,
    DailySummaryJob: summarize_day,
    MemoryRecordsJob: index_chat,
    UsageJob: record_usage,
    ContinueRunJob: continue_waiting_run,
}
"""The jobs of this package. `ResponseJob` (a background /v1/responses run, jobs/responses.py) is added by the
composition root, bound to its ResponseStore."""


class UnknownJob(LookupError):
    """A job of a type the map has no handler for: it fails, so it is retried and then dead-lettered, never lost."""


@dataclass(frozen=True)
class JobRunner:
    """The `{job type: handler}` map bound to the deps its handlers run with: a `JobHandler`."""

    handlers: HandlerMap
    deps: RunDeps

    async def __call__(self, job: Job) -> bool | None:
        handler = self.handlers.get(type(job))
        if handler is None:
            raise UnknownJob(f"no handler for {job.kind} jobs")
        with job_span(job.kind, job.traceparent, job.tracestate):
            return await run_metered(self.deps, job, handler)


ScheduledJob = Literal["idle_sessions", "daily_summary"]


class ScheduledPass(Protocol):
    """One scheduled pass at `now`: find the work due and enqueue it. `user_id` limits it to that user's data."""

    def __call__(self, deps: RunDeps, now: datetime, user_id: str | None = None) -> Awaitable[JobReport]: ...


SCHEDULED_PASSES: Mapping[ScheduledJob, ScheduledPass] = {
    "idle_sessions": run_idle_sessions,  # every 5 minutes
    "daily_summary": run_daily_summary,  # hourly at :30
}
