"""Job handlers: what the worker (or the in-process queue) does for each job kind."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import CompactJob, DailySummaryJob, Job, ProfileJob, ResponseJob, SessionSummaryJob
from agent_core.memory.compaction import CompactionPolicy, compact
from agent_core.observability import logger


class JobHandlers:
    """Dispatch by job kind. Every handler is idempotent; an exception means "retry" (SQS redelivers)."""

    def __init__(self, deps: RunDeps) -> None:
        self.deps = deps

    async def handle(self, job: Job) -> bool | None:
        """True when the job wrote something (a summary, a profile), False when there was nothing to do."""
        deps = self.deps
        if isinstance(job, CompactJob):
            s = deps.settings
            policy = CompactionPolicy(window=s.memory_window, compact_after=s.memory_compact_after)
            changed = await compact(deps.store, deps.llm, job.model, job.chat_id, policy)
            logger.info("compaction", extra={"chatId": job.chat_id, "changed": changed})
            return bool(changed)
        if isinstance(job, SessionSummaryJob):
            from agent_core.jobs.session_summaries import summarize_session

            return await summarize_session(deps, job)
        if isinstance(job, ProfileJob):
            from agent_core.jobs.profile import extract_profile

            return await extract_profile(deps, job)
        if isinstance(job, DailySummaryJob):
            from agent_core.jobs.daily import summarize_day

            return await summarize_day(deps, job)
        if isinstance(job, ResponseJob):
            await self._response(job)
        return None

    async def _response(self, job: ResponseJob) -> None:
        handler = self.deps.response_jobs
        if handler is None:
            logger.warning("no handler for background responses", extra={"responseId": job.response_id})
            return
        await handler(job)
