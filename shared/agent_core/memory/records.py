"""Memory records: what long-term (semantic) memory recalls. One record is a small window of a chat's stored
messages (`message`: 1-4 messages), or a summary (`session`, `daily`) or a profile fact (`fact`).

Record ids are deterministic (the kind plus what it is made from), so a job that runs twice writes each record
once, and a message window is the same record whichever job builds it.
"""

from __future__ import annotations

from agent_core.domain.memory import MemoryRecord, RecordKind
from agent_core.domain.models import Kind, Message, Role

WINDOW = 4  # messages per message record: two exchanges (what was said, the answer, and what followed)
STRIDE = 2  # windows start at every second message: each message is in two windows, with context either side
MAX_CITED = 4  # a record citing more stored messages than this is a summary


ROLE_LABEL = {Role.USER: "user", Role.ASSISTANT: "assistant"}


def dialogue(messages: list[Message]) -> list[Message]:
    """The messages memory keeps: user and assistant text (tool traffic and daily-summary copies left out)."""
    return [
        m for m in messages if m.kind == Kind.NORMAL and m.role in ROLE_LABEL and m.content.strip() and not m.tool_calls
    ]


def render(messages: list[Message]) -> str:
    return "\n".join(f"{ROLE_LABEL[m.role]}: {m.content.strip()}" for m in messages)


def message_record_id(first_id: str, size: int) -> str:
    return f"m{size}#{first_id}"


def message_records(
    user_id: str, chat_id: str, messages: list[Message], *, size: int = WINDOW, stride: int = STRIDE
) -> list[MemoryRecord]:
    """Sliding windows of `size` consecutive dialogue messages (every `stride`-th start), oldest first; a chat
    shorter than a window gives one record of what it has."""
    kept = dialogue(messages)
    if not kept:
        return []
    starts = list(range(0, max(1, len(kept) - size + 1), stride))
    if starts[-1] + size < len(kept):
        starts.append(len(kept) - size)  # the tail is covered too
    out = []
    for start in starts:
        window = kept[start : start + size]
        out.append(
            MemoryRecord(
                record_id=message_record_id(window[0].id, len(window)),
                user_id=user_id,
                kind=RecordKind.MESSAGE,
                text=render(window),
                chat_id=chat_id,
                message_ids=[m.id for m in window],
                at=window[0].created_at,
            )
        )
    return out


def summary_record(
    user_id: str, kind: RecordKind, key: str, text: str, chat_id: str, message_ids: list[str], at: int
) -> MemoryRecord:
    """A session or daily summary, or a profile fact, as one record (`key`: its session, date or fact key)."""
    return MemoryRecord(
        record_id=f"{kind.value}#{chat_id}#{key}" if chat_id else f"{kind.value}#{key}",
        user_id=user_id,
        kind=kind,
        text=text,
        chat_id=chat_id,
        message_ids=message_ids,
        at=at,
    )
