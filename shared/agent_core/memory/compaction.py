"""Compaction: fold everything but the last window of messages into a new rolling SUMMARY."""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.domain.ids import now_ms
from agent_core.domain.models import Kind, Message, Role, Summary
from agent_core.llm.base import LlmClient
from agent_core.memory.summarize import summarise
from agent_core.store.base import MemoryStore


@dataclass(frozen=True)
class CompactionPolicy:
    window: int
    compact_after: int


def needs_compaction(uncovered_normal: int, policy: CompactionPolicy) -> bool:
    return uncovered_normal > policy.compact_after


def fold_point(messages: list[Message], window: int) -> int:
    """How many of `messages` to fold: all but the last `window`, never splitting a tool call from its results."""
    cut = max(0, len(messages) - window)
    while 0 < cut < len(messages) and messages[cut].role == Role.TOOL:
        cut -= 1
    return cut


async def compact(store: MemoryStore, llm: LlmClient, model: str, chat_id: str, policy: CompactionPolicy) -> bool:
    """Replace the SUMMARY atomically; idempotent: nothing to fold, or a lost race, changes nothing."""
    previous = await store.get_summary(chat_id)
    after = previous.covers_message_id if previous else None
    uncovered = [m for m in await store.messages_between(chat_id, after, None) if m.kind == Kind.NORMAL]
    if not needs_compaction(len(uncovered), policy):
        return False
    cut = fold_point(uncovered, policy.window)
    if cut == 0:
        return False
    folded = uncovered[:cut]
    text = (await summarise(llm, model, folded, previous=previous.content if previous else "")).summary
    summary = Summary(
        chat_id=chat_id,
        content=text,
        covers_message_id=folded[-1].id,
        covered_count=(previous.covered_count if previous else 0) + len(folded),
        updated_at=now_ms(),
        version=(previous.version + 1) if previous else 1,
    )
    return await store.replace_summary(summary, previous.version if previous else None)
