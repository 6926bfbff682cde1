"""Usage of the jobs: the usage job (a run's spend added to its user's ledger, exactly once however often it runs),
and the model use of the background jobs, counted under the user they serve."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.jobs import CompactJob, DailySummaryJob, Job, ProfileJob, SessionSummaryJob, UsageJob
from agent_core.errors import ServiceUnavailable
from agent_core.jobs.sqs import MAX_DELAY_S
from agent_core.memory.calendar import zone
from agent_core.observability import logger
from agent_core.store.retry import retry_write, write_backoff
from agent_core.usage.counting import CountingLlm
from agent_core.usage.ledger import UsageRecord

# The jobs that call the model on a user's behalf (a background /v1/responses run is a run: counted as one).
METERED_JOBS = (CompactJob, SessionSummaryJob, ProfileJob, DailySummaryJob)


# On the in-process queue (no SQS: the local server) a record is handed off at most this often.
MAX_LOCAL_HANDOFFS = 8


async def record_usage(deps: RunDeps, job: UsageJob) -> bool:
    """Retried on throttling and timeouts (the write is idempotent: its marker makes it exactly once). A lasting
    storage fault does not lose the record: it is handed to the work queue to land later (`_hand_off`)."""
    meter = deps.usage
    if meter is None:
        return False
    try:
        return await retry_write(lambda: meter.record_job(job), write_backoff(deps.settings), "record_usage")
    except ServiceUnavailable:
        if not await _hand_off(deps, job):
            raise
        return False


async def _hand_off(deps: RunDeps, job: UsageJob) -> bool:
    """Queue the record again for later; False when it is the queue's to retry (raise: SQS redelivers it, then
    dead-letters it) or when it cannot be queued.

    A run's record is first written in the run's process (`RunDeps.in_process`); when that write fails it goes
    to `deps.work_queue` (AGENT_USAGE_HANDOFF_DELAY_S later, doubling): SQS in Lambda, where a failure of the
    worker is SQS's redrive (the message comes back after its visibility timeout, to the dead-letter queue
    after maxReceiveCount); locally the in-process queue, whose journal keeps it across restarts, at most
    MAX_LOCAL_HANDOFFS times.
    """
    durable = deps.work_queue is not deps.in_process
    if job.handoffs > 0 and (durable or job.handoffs >= MAX_LOCAL_HANDOFFS):
        return False
    later = job.model_copy(update={"handoffs": job.handoffs + 1, "job_run_id": "", "traceparent": ""})
    delay = min(deps.settings.usage_handoff_delay_s * 2**job.handoffs, MAX_DELAY_S)
    extra = {"userId": job.user_id, "marker": job.marker, "handoffs": later.handoffs, "delayS": delay}
    try:
        await deps.work_queue.enqueue(later, delay_s=delay)
    except Exception:
        logger.exception("usage record lost: the ledger write and its hand-off both failed", extra=extra)
        return False
    logger.warning("usage record handed to the work queue", extra=extra)
    return True


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
