"""What every Store role written on the Table port holds: the table, the memory records, the blob spiller, and the
reads two roles share (a chat's partition, the messages of a span)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.models import Message
from agent_core.errors import InvalidRequest
from agent_core.store import items as it
from agent_core.store.blob import BlobStore
from agent_core.store.cursor import decode_cursor
from agent_core.store.memory_records import RecordStore, RecordTable
from agent_core.store.schema import SK
from agent_core.store.spill import Spiller
from agent_core.store.table import Item, SkRange, Table


def checked_cursor(cursor: str | None, attr: str, expected: str) -> Item | None:
    """A listing's start key from its cursor; a cursor of another listing is refused."""
    start = decode_cursor(cursor)
    if start is not None and start.get(attr) != expected:
        raise InvalidRequest("cursor does not belong to this listing", param="cursor")
    return start


class TableRole:
    """The base of each role's implementation (chats, turns, waits, memory) over one table."""

    def __init__(self, table: Table, blobs: BlobStore | None = None) -> None:
        self.table = table
        self.records: RecordStore = RecordTable(table)
        # With a blob store, items that could cross DynamoDB's 400 KB limit keep large parts in it.
        self.spiller = Spiller(blobs) if blobs is not None else None

    async def _fit(self, items: list[Item]) -> list[Item]:
        """The items as they can be written: large parts already in the blob store (before any write)."""
        if self.spiller is None:
            return items
        return [await self.spiller.fit(item) for item in items]

    async def _restore(self, items: list[Item]) -> list[Item]:
        return items if self.spiller is None else await self.spiller.restore(items)

    async def _partition(self, pk: str) -> AsyncIterator[Item]:
        start: Item | None = None
        while True:
            page = await self.table.query(pk, start_key=start, limit=500)
            for item in page.items:
                yield item
            if page.last_key is None:
                return
            start = page.last_key

    async def messages_between(self, chat_id: str, after_id: str | None, upto_id: str | None) -> list[Message]:
        """The chat's messages after `after_id` up to `upto_id` (both open when None), oldest first: read by
        the chat's listings and by the memory jobs alike."""
        low = it.message_sk(after_id) if after_id else it.MSG_PREFIX
        high = it.message_sk(upto_id) if upto_id else it.MSG_END
        found: list[Message] = []
        start: Item | None = None
        while True:
            page = await self.table.query(it.chat_pk(chat_id), SkRange(low=low, high=high), start_key=start, limit=500)
            found.extend(it.message_from_item(i) for i in await self._restore(page.items) if i[SK] != low)
            if page.last_key is None:
                return found
            start = page.last_key
