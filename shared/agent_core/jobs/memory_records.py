"""Memory records, written off the turn's critical path: after each turn (and an import) the chat's new
exchanges; with each session summary, daily summary and profile update, that summary or those facts.

Every record has a deterministic id and `LongTermMemory.add` skips the ids the user has, so a retried job
writes each record once.
"""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import MemoryRecordsJob
from agent_core.domain.models import DailySummary, Message, Profile, SessionSummary
from agent_core.memory.calendar import id_floor
from agent_core.memory.records import WINDOW, RecordKind, dialogue, message_records, summary_record
from agent_core.observability import logger
from agent_core.store.memory_records import RecordsMark


async def index_chat(deps: RunDeps, job: MemoryRecordsJob) -> bool:
    """The chat's message windows that end after the last indexed message; then the mark moves on."""
    memory = deps.memory
    if memory is None:
        return False
    chat = await deps.chats.get_chat(job.chat_id, job.user_id)
    if chat is None:
        logger.info("memory records dropped: the chat is gone", extra={"chatId": job.chat_id})
        return False
    mark = await memory.records.get_mark(job.chat_id)
    after = id_floor(mark.context_at) if mark else None
    kept = dialogue(await deps.chats.messages_between(job.chat_id, after, None))
    if not kept or (mark is not None and kept[-1].id <= mark.upto_id):
        return False
    records = message_records(job.user_id, job.chat_id, kept)
    if mark is not None:
        records = [r for r in records if r.message_ids[-1] > mark.upto_id]
    written = await memory.add(job.user_id, records)
    context = kept[max(0, len(kept) - (WINDOW - 1))]  # the first message the next window needs
    await memory.records.set_mark(job.chat_id, RecordsMark(kept[-1].id, context.created_at))
    return written > 0


async def remember_session(deps: RunDeps, session: SessionSummary, messages: list[Message]) -> None:
    """The session's summary as one record citing the session's messages."""
    if deps.memory is None or session.skipped or not session.summary.strip():
        return
    text = session.summary
    if session.key_topics:
        text += "\nTopics: " + ", ".join(session.key_topics)
    ids = [m.id for m in dialogue(messages)]
    record = summary_record(
        session.user_id, RecordKind.SESSION, session.session_id, text, session.chat_id, ids, session.started_at
    )
    await deps.memory.add(session.user_id, [record])


async def remember_day(deps: RunDeps, day: DailySummary, start_ms: int) -> None:
    """The user's day summary as one record (rewritten when the day is summarised again)."""
    if deps.memory is None or not day.summary.strip():
        return
    record = summary_record(day.user_id, RecordKind.DAILY, day.date, day.summary, "", [], start_ms)
    await deps.memory.add(day.user_id, [record], replace=True)


async def remember_facts(deps: RunDeps, profile: Profile, at_ms: int) -> None:
    """Each profile fact as a record (a fact whose value changed replaces its record)."""
    if deps.memory is None or not profile.facts:
        return
    known = {s.record.record_id: s.record.text for s in await deps.memory.records.load(profile.user_id)}
    records = [
        summary_record(profile.user_id, RecordKind.FACT, f"{f.aspect}:{f.key}", f"{f.key}: {f.value}", "", [], at_ms)
        for f in profile.facts
    ]
    changed = [r for r in records if known.get(r.record_id) != r.text]
    await deps.memory.add(profile.user_id, changed, replace=True)
