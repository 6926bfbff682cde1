"""The SQS batch consumer: one job per record, a partial batch response for the records that failed.

A batch is a traced job run (`worker_batch_start` / `worker_batch_end`); each job's log lines carry the
`jobRunId` of the run that enqueued it (else the batch's), so one scheduled pass can be followed into the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from agent_core.domain.jobs import Job, parse_job
from agent_core.jobs.job_run import job_run, traced
from agent_core.jobs.report import JobReport
from agent_core.observability import logger

# A handler returns True when it wrote something (a summary), False when there was nothing to do.
JobHandler = Callable[[Job], Awaitable[object]]
CONCURRENCY = 4  # records of one batch run at most this many at a time


async def _process_record(
    record: dict[str, Any], handle: JobHandler, slots: asyncio.Semaphore, report: JobReport
) -> str | None:
    """Run one record's job; returns its messageId when it failed (and must be retried), else None."""
    message_id = str(record.get("messageId", ""))
    receive_count = record.get("attributes", {}).get("ApproximateReceiveCount")
    try:
        job = parse_job(record.get("body") or "")
    except ValidationError as exc:
        # Never log the body: it may carry user data. The error types and locations say what is wrong.
        problems = [f"{'.'.join(map(str, e['loc']))}:{e['type']}" for e in exc.errors()]
        logger.error("malformed job message", extra={"messageId": message_id, "problems": problems[:5]})
        report.failed += 1
        report.count("malformed")
        return message_id
    keys = {"jobKind": job.kind, "messageId": message_id, "batchRunId": report.job_run_id}
    with traced(job.job_run_id or report.job_run_id, **keys):
        async with slots:
            try:
                outcome = await handle(job)
            except Exception as exc:
                report.failed += 1
                extra = {**keys, "receiveCount": receive_count, "error": type(exc).__name__}
                logger.exception("job failed", extra=extra)
                return message_id
        if outcome is True:
            report.summarised += 1
        elif outcome is False:
            report.skipped += 1
        logger.info("job done", extra={**keys, "changed": outcome})
    return None


async def process_batch(event: dict[str, Any], handle: JobHandler, concurrency: int = CONCURRENCY) -> dict[str, Any]:
    """An SQS event's partial batch response; never raises, even when every record failed."""
    records: list[dict[str, Any]] = list(event.get("Records") or [])
    slots = asyncio.Semaphore(max(1, concurrency))
    with job_run("worker_batch") as report:
        report.scanned = len(records)
        outcomes = await asyncio.gather(*(_process_record(record, handle, slots, report) for record in records))
    failures = [{"itemIdentifier": message_id} for message_id in outcomes if message_id is not None]
    return {"batchItemFailures": failures}
