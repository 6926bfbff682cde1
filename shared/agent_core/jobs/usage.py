"""Usage of the jobs: the usage job (a run's spend added to its user's ledger, exactly once however often it runs),
and the model use of the background jobs, counted under the user they serve."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.jobs import CompactJob, DailySummaryJob, Job, ProfileJob, SessionSummaryJob, UsageJob
from agent_core.memory.calendar import zone
from agent_core.store.retry import retry_write, write_backoff
from agent_core.usage.counting import CountingLlm
from agent_core.usage.ledger import UsageRecord

# The jobs that call the model on a user's behalf (a background /v1/responses run is a run: counted as one).
METERED_JOBS = (CompactJob, SessionSummaryJob, ProfileJob, DailySummaryJob)


async def record_usage(deps: RunDeps, job: UsageJob) -> bool:
    """Retried on throttling and timeouts (the write is idempotent); a record that still fails is logged."""
    meter = deps.usage
    if meter is None:
        return False
    return await retry_write(lambda: meter.record_job(job), write_backoff(deps.settings), "record_usage")


def job_identity(job: Job) -> str:
    """The same for every delivery of one job (whatever pass or batch carried it)."""
    body = job.model_dump_json(exclude={"job_run_id"})
    return hashlib.sha256(body.encode()).hexdigest()[:32]


async def run_metered(deps: RunDeps, job: Job, handler: Any) -> bool | None:
    """Run `handler` with a model client that counts; when it succeeds, add what it spent to the ledger of the
    job's user, once per job however often it is delivered."""
    user_id = getattr(job, "user_id", "") or ""
    if deps.usage is None or not user_id or not isinstance(job, METERED_JOBS):
        result: bool | None = await handler(deps, job)
        return result
    counting = CountingLlm(deps.llm)
    result = await handler(dataclasses.replace(deps, llm=counting), job)
    if counting.by_model:
        profile = await deps.memory_store.get_profile(user_id)
        tz = zone(profile.timezone if profile else None, deps.settings.default_timezone)
        day = datetime.now(UTC).astimezone(tz).date().isoformat()
        identity = job_identity(job)
        for model, usage in counting.by_model.items():
            marker = f"job:{job.kind}:{identity}:{model}"
            await deps.usage.ledger.record(UsageRecord(user_id, day, model, marker, usage, jobs=1))
    return result
