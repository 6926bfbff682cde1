"""The SQS batch consumer: one job per record, a partial batch response for the records that failed.

Powertools' `AsyncBatchProcessor` runs the records concurrently and builds `{"batchItemFailures": [...]}` from
the ones whose handler raised (a malformed body or an unknown job kind included); an entirely failed batch is
reported too, never raised, so SQS redelivers exactly the failed records.

A batch is a traced job run (`worker_batch_start` / `worker_batch_end`); each job's log lines carry the
`jobRunId` of the run that enqueued it (else the batch's), so one scheduled pass can be followed into the worker.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from agent_core.domain.jobs import JobHandler, parse_job
from agent_core.jobs.job_run import job_run, traced
from agent_core.jobs.report import JobReport
from agent_core.observability import logger

CONCURRENCY = 4  # records of one batch run at most this many at a time


class MalformedJob(Exception):
    """A record whose body is not a job this worker knows (its text names only the problems, never the body)."""


class _RecordRunner:
    """The batch processor's record handler: parse the job, run it within the bound, count the outcome."""

    def __init__(self, handle: JobHandler, slots: asyncio.Semaphore, report: JobReport) -> None:
        self.handle, self.slots, self.report = handle, slots, report

    async def __call__(self, record: SQSRecord) -> object:
        report = self.report
        message_id = record.message_id
        try:
            job = parse_job(record.get("body") or "")
        except ValidationError as exc:
            # Never log the body: it may carry user data. The error types and locations say what is wrong.
            problems = [f"{'.'.join(map(str, e['loc']))}:{e['type']}" for e in exc.errors()]
            logger.error("malformed job message", extra={"messageId": message_id, "problems": problems[:5]})
            report.failed += 1
            report.count("malformed")
            raise MalformedJob(", ".join(problems[:5])) from None
        keys = {"jobKind": job.kind, "messageId": message_id, "batchRunId": report.job_run_id}
        with traced(job.job_run_id or report.job_run_id, **keys):
            async with self.slots:
                try:
                    outcome = await self.handle(job)
                except Exception as exc:
                    report.failed += 1
                    receive_count = (record.get("attributes") or {}).get("ApproximateReceiveCount")
                    extra = {**keys, "receiveCount": receive_count, "error": type(exc).__name__}
                    logger.exception("job failed", extra=extra)
                    raise
            if outcome is True:
                report.summarised += 1
            elif outcome is False:
                report.skipped += 1
            logger.info("job done", extra={**keys, "changed": outcome})
        return outcome


async def process_batch(event: dict[str, Any], handle: JobHandler, concurrency: int = CONCURRENCY) -> dict[str, Any]:
    """An SQS event's partial batch response; never raises, even when every record failed."""
    records: list[dict[str, Any]] = list(event.get("Records") or [])
    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with job_run("worker_batch") as report:
        report.scanned = len(records)
        runner = _RecordRunner(handle, asyncio.Semaphore(max(1, concurrency)), report)
        with processor(records, runner):
            # `async_process_partial_response` / `processor.async_process()` run the records on an event loop of
            # their own (asyncio.run, or run_until_complete on the thread's loop), which cannot happen inside this
            # already running loop, the one the cached clients and the in-process queue are bound to. So the
            # records are gathered here, exactly as `async_process()` gathers them; the processor still turns
            # each outcome into the partial batch response.
            await asyncio.gather(*(processor._async_process_record(record) for record in records))
    return cast(dict[str, Any], processor.response())
