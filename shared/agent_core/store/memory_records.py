"""Where memory records and their vectors live: items of the one table (DynamoDB, SQLite or in-memory) under the
user's own partition, so every read is keyed by the user and no search can reach another user's records.

| item | pk | sk |
|---|---|---|
| record | `MEM#{userId}` | `REC#{recordId}`: kind, text, chatId, messageIds, at, vector (base64 float32), embedder |
| version | `MEM#{userId}` | `VER` (a token replaced on every write or delete) |

A search reads the version item (one GetItem) and reuses the index it built in process for that version; only a
changed version reads the partition again (Query, 1 MB pages). A user's records are bounded (a window per
exchange plus the summaries), so scoring them in process is the plan at this scale; docs/design.md ("Memory
records") says what replaces it beyond.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from agent_core.domain.ids import sortable_id
from agent_core.domain.memory import MemoryRecord, RecordKind
from agent_core.store.items import REC_PREFIX, mark_key, record_key, records_pk, version_key
from agent_core.store.schema import PK, SK
from agent_core.store.table import Item, Key, Table, Update

Vector = np.ndarray  # float32, L2-normalised (memory/embedding.py makes them)
_GROUP = 16  # records written at a time (PutItem each)


@dataclass(frozen=True)
class StoredRecord:
    record: MemoryRecord
    vector: Vector | None  # None when it was embedded in another space than the reader's
    embedder: str


def encode_vector(vector: Vector) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def decode_vector(text: str) -> Vector:
    return np.frombuffer(base64.b64decode(text), dtype=np.float32)


def record_item(record: MemoryRecord, vector: Vector, embedder: str) -> Item:
    return {
        **record_key(record.user_id, record.record_id),
        "kind": record.kind.value,
        "text": record.text,
        "chatId": record.chat_id,
        "messageIds": list(record.message_ids),
        "at": record.at,
        "vec": encode_vector(vector),
        "emb": embedder,
    }


def record_from_item(item: Item, user_id: str) -> StoredRecord:
    record = MemoryRecord(
        record_id=str(item[SK]).removeprefix(REC_PREFIX),
        user_id=user_id,
        kind=RecordKind(item["kind"]),
        text=str(item["text"]),
        chat_id=str(item.get("chatId") or ""),
        message_ids=[str(m) for m in item.get("messageIds") or []],
        at=int(item["at"]),
    )
    return StoredRecord(record, decode_vector(str(item["vec"])), str(item.get("emb") or ""))


class RecordStore(Protocol):
    """A user's memory records: written by the jobs, read by search, erased with their chat or the profile."""

    async def version(self, user_id: str) -> str: ...

    async def load(self, user_id: str) -> list[StoredRecord]: ...

    async def put_records(self, user_id: str, records: list[tuple[MemoryRecord, Vector]], embedder: str) -> None: ...

    async def delete_chat_records(self, user_id: str, chat_id: str) -> int: ...

    async def delete_user_records(self, user_id: str) -> int: ...

    async def get_mark(self, chat_id: str) -> RecordsMark | None: ...

    async def set_mark(self, chat_id: str, mark: RecordsMark) -> None: ...


class RecordTable:
    """The RecordStore on the Table port: the same code for DynamoDB, SQLite and the in-memory table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def version(self, user_id: str) -> str:
        item = await self.table.get(version_key(user_id))
        return str(item["version"]) if item else ""

    async def _items(self, user_id: str) -> AsyncIterator[Item]:
        start: Item | None = None
        while True:
            page = await self.table.query(records_pk(user_id), start_key=start)
            for item in page.items:
                if str(item[SK]).startswith(REC_PREFIX):
                    yield item
            if page.last_key is None:
                return
            start = page.last_key

    async def load(self, user_id: str) -> list[StoredRecord]:
        return [record_from_item(item, user_id) async for item in self._items(user_id)]

    async def put_records(self, user_id: str, records: list[tuple[MemoryRecord, Vector]], embedder: str) -> None:
        """Write records (each under its deterministic id: a rewrite is the same item), then a new version (a
        search meanwhile uses the index it has; the new version makes the next one read them)."""
        mine = [(r, v) for r, v in records if r.user_id == user_id]
        for start in range(0, len(mine), _GROUP):
            group = mine[start : start + _GROUP]
            await asyncio.gather(*(self.table.put(record_item(r, v, embedder)) for r, v in group))
        if mine:
            await self.table.update(version_key(user_id), Update(set={"version": sortable_id()}))

    async def _delete(self, user_id: str, keys: list[Key]) -> int:
        if keys:
            await self.table.batch_delete(keys)
            await self.table.update(version_key(user_id), Update(set={"version": sortable_id()}))
        return len(keys)

    async def delete_chat_records(self, user_id: str, chat_id: str) -> int:
        keys = [{PK: i[PK], SK: i[SK]} async for i in self._items(user_id) if i.get("chatId") == chat_id]
        return await self._delete(user_id, keys)

    async def delete_user_records(self, user_id: str) -> int:
        keys = [{PK: i[PK], SK: i[SK]} async for i in self._items(user_id)]
        return await self._delete(user_id, keys)

    async def get_mark(self, chat_id: str) -> RecordsMark | None:
        return await _get_mark(self.table, chat_id)

    async def set_mark(self, chat_id: str, mark: RecordsMark) -> None:
        # Only while the chat exists: a job that runs after the chat was deleted leaves nothing behind.
        item = {**mark_key(chat_id), "uptoId": mark.upto_id, "contextAt": mark.context_at}
        await self.table.put(item)


@dataclass(frozen=True)
class RecordsMark:
    """How far a chat's messages are made into records: the last message indexed, and the creation time of the
    first message the next window needs before it (the next job reads from there)."""

    upto_id: str
    context_at: int


async def _get_mark(table: Table, chat_id: str) -> RecordsMark | None:
    item = await table.get(mark_key(chat_id))
    return RecordsMark(str(item["uptoId"]), int(item["contextAt"])) if item else None
