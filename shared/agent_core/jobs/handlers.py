"""Job handlers: what the worker (or the in-process queue) does for each job kind."""

from __future__ import annotations

from agent_core.config import Settings
from agent_core.domain.jobs import Job
from agent_core.llm.base import LlmClient
from agent_core.memory.compaction import CompactionPolicy, compact
from agent_core.observability import logger
from agent_core.store.base import Store


class JobHandlers:
    def __init__(self, settings: Settings, store: Store, llm: LlmClient) -> None:
        self.settings = settings
        self.store = store
        self.llm = llm

    async def handle(self, job: Job) -> None:
        if job.kind == "compact":
            policy = CompactionPolicy(
                window=self.settings.memory_window, compact_after=self.settings.memory_compact_after
            )
            changed = await compact(self.store, self.llm, job.model, job.chat_id, policy)
            logger.info("compaction", extra={"chatId": job.chat_id, "changed": changed})
