"""Compaction job: fold a chat's older messages into its rolling summary (after a turn went past the window)."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import CompactJob
from agent_core.memory.compaction import CompactionPolicy, compact
from agent_core.observability import logger


async def compact_chat(deps: RunDeps, job: CompactJob) -> bool:
    """True when the summary moved on; idempotent (nothing to fold, or a lost race, changes nothing)."""
    s = deps.settings
    policy = CompactionPolicy(window=s.memory_window, compact_after=s.memory_compact_after)
    changed = await compact(deps.memory_store, deps.llm, job.model, job.chat_id, policy)
    logger.info("compaction", extra={"chatId": job.chat_id, "changed": changed})
    return bool(changed)
