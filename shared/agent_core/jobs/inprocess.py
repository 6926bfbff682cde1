"""The in-process work queue: jobs run as asyncio tasks (local server, tests, and Lambda until SQS)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from agent_core.domain.jobs import Job
from agent_core.jobs.job_run import stamped, traced
from agent_core.observability import logger

JobHandler = Callable[[Job], Awaitable[object]]


class InProcessWorkQueue:
    """Runs each job as a task; `join()` waits for every job enqueued so far."""

    def __init__(self, handler: JobHandler) -> None:
        self._handler = handler
        self._tasks: set[asyncio.Task[None]] = set()
        self.completed = 0
        self.failed = 0

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        job = stamped(job)
        task = asyncio.create_task(self._run(job, delay_s), name=f"job-{job.kind}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def enqueue_many(self, jobs: list[Job]) -> None:
        for job in jobs:
            await self.enqueue(job)

    async def _run(self, job: Job, delay_s: int = 0) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        try:
            if job.job_run_id:
                with traced(job.job_run_id, jobKind=job.kind):
                    await self._handler(job)
            else:
                await self._handler(job)
            self.completed += 1
        except Exception:
            self.failed += 1
            logger.exception("job failed", extra={"job": job.model_dump()})

    async def join(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks))
