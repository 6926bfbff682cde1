"""Profile job: after a session summary, extract durable facts and merge them into the user's profile."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.ids import now_ms
from agent_core.domain.jobs import ProfileJob
from agent_core.domain.models import Profile
from agent_core.jobs.memory_records import remember_facts
from agent_core.memory.profile import merge_facts
from agent_core.memory.summarize import summarise
from agent_core.observability import logger


async def extract_profile(deps: RunDeps, job: ProfileJob) -> bool:
    """Idempotent: facts already merged from this session are merged again to the same result."""
    session = await deps.memory_store.get_session(job.chat_id, job.session_id)
    if session is None or session.skipped or not session.summary:
        logger.info("profile job dropped: no session summary", extra={"sessionId": job.session_id})
        return False
    result = await summarise(deps.llm, deps.settings.model, session.summary, kind="profile")
    if not result.facts:
        return False
    profile = await deps.memory_store.get_profile(job.user_id) or Profile(user_id=job.user_id)
    merged = merge_facts(profile, result.facts, session.local_date)
    merged.updated_at = now_ms()
    await deps.memory_store.put_profile(merged)
    await remember_facts(deps, merged, session.started_at)
    return True
