"""The SQS work queue: jobs become messages for the worker function (boto3 in a worker thread)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_core.backoff import Backoff, Sleep, retrying
from agent_core.domain.jobs import Job, dump_job
from agent_core.jobs.job_run import stamped
from agent_core.observability import logger
from agent_core.store.aws_client import ThreadedAwsClient

MAX_DELAY_S = 900  # SQS DelaySeconds: 0..900
BATCH_SIZE = 10  # SendMessageBatch: at most 10 entries
# The first send and up to three resends of the entries that failed, after 0.1, 0.2 and 0.4 s.
BATCH_BACKOFF = Backoff(attempts=4, base_s=0.1, jitter="none")


class _EntriesFailed(RuntimeError):
    """Some entries of a batch failed on the server's side: worth sending again."""


class EnqueueError(RuntimeError):
    """Some jobs could not be sent to the queue (after retrying the entries that failed)."""

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        self.failures = failures  # (job kind, SQS error code) per job still unsent
        codes = ", ".join(f"{kind}:{code}" for kind, code in failures)
        super().__init__(f"{len(failures)} job(s) not enqueued: {codes}")


def clamp_delay(delay_s: int) -> int:
    """A delay SQS accepts: 0 to 900 seconds."""
    return max(0, min(int(delay_s), MAX_DELAY_S))


class SqsWorkQueue(ThreadedAwsClient):
    """The WorkQueue port on one SQS queue; `enqueue_many` sends batches of 10 and retries failed entries."""

    def __init__(
        self,
        queue_url: str,
        client_factory: Callable[[], Any],
        *,
        backoff: Backoff = BATCH_BACKOFF,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.queue_url = queue_url
        self.backoff = backoff
        self._sleep = sleep
        super().__init__(client_factory)

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        body = dump_job(stamped(job))
        await self._call("send_message", QueueUrl=self.queue_url, MessageBody=body, DelaySeconds=clamp_delay(delay_s))

    async def enqueue_many(self, jobs: list[Job]) -> None:
        jobs = [stamped(job) for job in jobs]
        failures: list[tuple[str, str]] = []
        for start in range(0, len(jobs), BATCH_SIZE):
            failures += await self._send_batch(jobs[start : start + BATCH_SIZE])
        if failures:
            raise EnqueueError(failures)

    async def _send_batch(self, jobs: list[Job]) -> list[tuple[str, str]]:
        """Send up to 10 jobs; returns (kind, code) for each job still unsent after the retries."""
        pending = {str(index): job for index, job in enumerate(jobs)}
        given_up: list[tuple[str, str]] = []
        sent = 0

        async def send() -> None:
            nonlocal pending, sent
            entries = [{"Id": key, "MessageBody": dump_job(job)} for key, job in pending.items()]
            response = await self._call("send_message_batch", QueueUrl=self.queue_url, Entries=entries)
            sent += 1
            retry: dict[str, Job] = {}
            for failed in response.get("Failed", []):
                job = pending[failed["Id"]]
                code = str(failed.get("Code", "unknown"))
                if failed.get("SenderFault"):
                    given_up.append((job.kind, code))  # the request itself is wrong: retrying cannot help
                else:
                    retry[failed["Id"]] = job
            pending = retry
            if pending:
                kinds = [j.kind for j in retry.values()]
                logger.warning("queue batch entries failed", extra={"attempt": sent, "kinds": kinds})
                raise _EntriesFailed(f"{len(pending)} entries failed")

        try:
            await retrying(send, self.backoff, _EntriesFailed, sleep=self._sleep)
        except _EntriesFailed:
            return given_up + [(job.kind, "retries_exhausted") for job in pending.values()]
        return given_up
