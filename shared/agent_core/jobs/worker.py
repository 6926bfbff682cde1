"""The SQS batch consumer: one job per record, a partial batch response for the records that failed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from agent_core.domain.jobs import Job, parse_job
from agent_core.observability import logger

JobHandler = Callable[[Job], Awaitable[None]]
CONCURRENCY = 4  # records of one batch run at most this many at a time


async def _process_record(record: dict[str, Any], handle: JobHandler, slots: asyncio.Semaphore) -> str | None:
    """Run one record's job; returns its messageId when it failed (and must be retried), else None."""
    message_id = str(record.get("messageId", ""))
    receive_count = record.get("attributes", {}).get("ApproximateReceiveCount")
    try:
        job = parse_job(record.get("body") or "")
    except ValidationError as exc:
        # Never log the body: it may carry user data. The error types and locations say what is wrong.
        problems = [f"{'.'.join(map(str, e['loc']))}:{e['type']}" for e in exc.errors()]
        logger.error("malformed job message", extra={"messageId": message_id, "problems": problems[:5]})
        return message_id
    async with slots:
        try:
            await handle(job)
        except Exception as exc:
            logger.exception(
                "job failed",
                extra={
                    "messageId": message_id,
                    "jobKind": job.kind,
                    "receiveCount": receive_count,
                    "error": type(exc).__name__,
                },
            )
            return message_id
    logger.info("job done", extra={"messageId": message_id, "jobKind": job.kind})
    return None


async def process_batch(event: dict[str, Any], handle: JobHandler, concurrency: int = CONCURRENCY) -> dict[str, Any]:
    """An SQS event's partial batch response; never raises, even when every record failed."""
    records: list[dict[str, Any]] = list(event.get("Records") or [])
    slots = asyncio.Semaphore(max(1, concurrency))
    outcomes = await asyncio.gather(*(_process_record(record, handle, slots) for record in records))
    failures = [{"itemIdentifier": message_id} for message_id in outcomes if message_id is not None]
    if failures:
        logger.warning("batch had failures", extra={"records": len(records), "failed": len(failures)})
    return {"batchItemFailures": failures}
