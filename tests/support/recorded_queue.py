"""A work queue that keeps the jobs it is given (tests run them, or check they were queued)."""

from __future__ import annotations

from agent_core.domain.jobs import ContinueRunJob, Job


class RecordedQueue:
    def __init__(self) -> None:
        self.jobs: list[Job] = []

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        self.jobs.append(job)

    async def enqueue_many(self, jobs: list[Job]) -> None:
        self.jobs.extend(jobs)

    def queued(self, run_id: str) -> bool:
        """A continuation of the run was queued."""
        return any(isinstance(job, ContinueRunJob) and job.run_id == run_id for job in self.jobs)

    def continuations(self, run_id: str) -> list[ContinueRunJob]:
        """The run's queued continuations, taken off the queue (the test runs them)."""
        mine = [job for job in self.jobs if isinstance(job, ContinueRunJob) and job.run_id == run_id]
        self.jobs = [job for job in self.jobs if not (isinstance(job, ContinueRunJob) and job.run_id == run_id)]
        return mine
