"""A long-term memory record: something the user said (a window of messages), a summary or a profile fact,
searchable by meaning and by words (memory/records.py makes them, store/memory_records.py keeps them)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from agent_core.domain.models import Model


class RecordKind(StrEnum):
    MESSAGE = "message"
    SESSION = "session"
    DAILY = "daily"
    FACT = "fact"


class MemoryRecord(Model):
    record_id: str
    user_id: str
    kind: RecordKind
    text: str
    chat_id: str = ""
    message_ids: list[str] = Field(default_factory=list)
    at: int  # epoch ms of its first message (a summary's start, a fact's session)
