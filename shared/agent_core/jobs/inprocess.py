"""The in-process work queue: jobs run as asyncio tasks (local server, tests, and Lambda until SQS)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from agent_core.domain.jobs import Job, JobHandler
from agent_core.jobs.job_run import stamped, traced
from agent_core.observability import logger


class JobJournal(Protocol):
    """Where the queue keeps each job until it has run (the embedded database locally)."""

    async def add(self, job: Job, delay_s: float = 0) -> int: ...

    async def done(self, entry: int) -> None: ...

    async def pending(self) -> list[tuple[int, Job, float]]: ...


@dataclass
class WorkDone:
    """What the jobs enqueued within `counting()` did once they ran (jobs they enqueued in turn included)."""

    changed: int = 0  # summary jobs (rolling, session, daily) that wrote their summary: the handler returned True
    failed: int = 0  # jobs that raised


SUMMARY_JOBS = frozenset({"compact", "session_summary", "daily_summary"})  # what a report's `summarised` counts
_counting: ContextVar[WorkDone | None] = ContextVar("agent_core_work_done", default=None)


@contextmanager
def counting() -> Iterator[WorkDone]:
    """Count the outcomes of the jobs enqueued within (a job's task keeps the context it was started in)."""
    done = WorkDone()
    token = _counting.set(done)
    try:
        yield done
    finally:
        _counting.reset(token)


class InProcessWorkQueue:
    """Runs each job as a task of this process, with the handler it `serve`s; `join()` waits for every job
    enqueued so far.

    With a journal, a job is recorded before its task starts and removed once it has run (succeeded or
    failed: a failure is logged, as before); a job interrupted by a stop or a crash stays recorded and
    `resume()` runs it again at the next start (jobs are idempotent).
    """

    def __init__(self, journal: JobJournal | None = None) -> None:
        self._handler: JobHandler | None = None
        self._journal = journal
        self._tasks: set[asyncio.Task[None]] = set()
        self.completed = 0
        self.failed = 0

    def serve(self, handler: JobHandler) -> None:
        """Run jobs with `handler` (the composition root's `JobRunner`, bound to the deps this queue is part of)."""
        self._handler = handler

    def _served(self) -> JobHandler:
        if self._handler is None:
            raise RuntimeError("the in-process queue runs jobs only once serve() gave it a handler")
        return self._handler

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        self._served()  # refused before the job is journalled
        job = stamped(job)
        entry = await self._journal.add(job, delay_s) if self._journal is not None else None
        self._start(job, delay_s, entry)

    def _start(self, job: Job, delay_s: float, entry: int | None) -> None:
        task = asyncio.create_task(self._run(job, delay_s, entry), name=f"job-{job.kind}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def enqueue_many(self, jobs: list[Job]) -> None:
        for job in jobs:
            await self.enqueue(job)

    async def resume(self) -> int:
        """Start every journalled job that has not run yet (at its due time); returns how many."""
        if self._journal is None:
            return 0
        self._served()
        pending = await self._journal.pending()
        now = time.time()
        for entry, job, due_at in pending:
            self._start(job, max(0.0, due_at - now), entry)
        if pending:
            logger.info("resumed queued jobs", extra={"jobs": len(pending)})
        return len(pending)

    async def _run(self, job: Job, delay_s: float = 0, entry: int | None = None) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        handler = self._served()
        done = _counting.get()
        try:
            if job.job_run_id:
                with traced(job.job_run_id, jobKind=job.kind):
                    outcome = await handler(job)
            else:
                outcome = await handler(job)
            self.completed += 1
            if done is not None and outcome is True and job.kind in SUMMARY_JOBS:
                done.changed += 1  # not the profile or memory-records jobs a summary queues after it
        except Exception:
            self.failed += 1
            if done is not None:
                done.failed += 1
            logger.exception("job failed", extra={"job": job.model_dump()})
        # Not in a `finally`: a job cancelled by a stop stays journalled and runs at the next start.
        if entry is not None and self._journal is not None:
            await self._journal.done(entry)

    async def join(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks))
