"""Long-term (semantic) memory, the L4 layer: a user's records, embedded and searched (hybrid retrieval).

`LongTermMemory` is what jobs, routes, the runtime and tools use: it embeds and writes new records, and searches
a user's records through an index it keeps in process per user and version (the store's version token changes
on every write or delete, in any process, so a search never sees a stale index for longer than one read).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from agent_core.memory.embedding import Embedder, Vector
from agent_core.memory.records import MemoryRecord
from agent_core.memory.retrieval import Hit, SearchQuery, UserIndex, search
from agent_core.store.memory_records import RecordStore
from agent_core.tracing import memory_span

CACHED_USERS = 64
MAX_RECORD_CHARS = 6000  # a record's text beyond this is cut (a window of long messages stays searchable)


class LongTermMemory:
    def __init__(self, records: RecordStore, embedder: Embedder, cached_users: int = CACHED_USERS) -> None:
        self.records = records
        self.embedder = embedder
        self._cache: OrderedDict[str, tuple[str, UserIndex]] = OrderedDict()
        self._cached_users = cached_users
        self._locks: dict[str, asyncio.Lock] = {}

    async def index(self, user_id: str, version: str | None = None) -> UserIndex:
        """The user's records ready to search: reused while the stored version is the one it was built from
        (`version`: the token the caller read already, e.g. with the turn's context; else it is read)."""
        if version is None:
            version = await self.records.version(user_id)
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] == version:
            self._cache.move_to_end(user_id)
            return cached[1]
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:
            cached = self._cache.get(user_id)
            if cached is not None and cached[0] == version:
                return cached[1]
            index = await self._build(user_id)
            self._cache[user_id] = (version, index)
            self._cache.move_to_end(user_id)
            while len(self._cache) > self._cached_users:
                self._cache.popitem(last=False)
            return index

    async def _build(self, user_id: str) -> UserIndex:
        stored = await self.records.load(user_id)
        dims = self.embedder.dimensions
        vectors: list[Vector | None] = [
            s.vector
            if s.embedder == self.embedder.name and s.vector is not None and s.vector.shape[0] == dims
            else None
            for s in stored
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            # Records embedded in another space (the embedder was changed): embedded again for this index.
            fresh = await self.embedder.embed([stored[i].record.text for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                vectors[i] = vector
        records = [s.record for s in stored]
        return UserIndex.build(records, [v for v in vectors if v is not None], dims)

    async def known_ids(self, user_id: str) -> set[str]:
        """The ids the user has: from the index when it is current, else read (no index built for a write)."""
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] == await self.records.version(user_id):
            return {r.record_id for r in cached[1].records}
        return {s.record.record_id for s in await self.records.load(user_id)}

    async def add(self, user_id: str, records: list[MemoryRecord], *, replace: bool = False) -> int:
        """Embed and write the records the user does not have yet (all of them with `replace`: a summary that
        changed); returns how many were written."""
        if not replace:
            known = await self.known_ids(user_id)
            records = [r for r in records if r.record_id not in known]
        records = [r.model_copy(update={"text": r.text[:MAX_RECORD_CHARS]}) for r in records if r.text.strip()]
        if not records:
            return 0
        vectors = await self.embedder.embed([r.text for r in records])
        await self.records.put_records(user_id, list(zip(records, vectors, strict=True)), self.embedder.name)
        return len(records)

    async def search(self, user_id: str, query: SearchQuery, version: str | None = None) -> tuple[list[Hit], int]:
        """The caller's best records for the query (see `retrieval.search`); never another user's. A user with no
        records (version "") costs no read and no embedding. Each search is one `search_memory` span."""
        with memory_span(user_id, query.text, query.limit) as span:
            if version is None:
                version = await self.records.version(user_id)
            if version == "":
                span.searched(0)
                span.found([], 0)
                return [], 0
            index = await self.index(user_id, version)
            span.searched(len(index.records))
            if not index.records or not query.text.strip():
                span.found([], 0)
                return [], 0
            (vector,) = await self.embedder.embed([query.text])
            hits, tokens = search(index, query, vector)
            span.found([(h.record.record_id, h.score) for h in hits], tokens)
            return hits, tokens
