"""In-memory table: the same semantics as DynamoDB for the operations the Store uses.

Used by tests and by store:false requests (a request-scoped store that writes nothing durable).
"""

from __future__ import annotations

import copy

from agent_core.store.schema import INDEXES, PK, SK, key_attributes
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Delete,
    Item,
    Key,
    Put,
    QueryPage,
    SkRange,
    TransactionFailed,
    Update,
    UpdateOp,
    WriteOp,
)


def _sk_matches(sk: str, rng: SkRange | None) -> bool:
    if rng is None:
        return True
    if rng.begins_with is not None and not sk.startswith(rng.begins_with):
        return False
    if rng.low is not None and sk < rng.low:
        return False
    return not (rng.high is not None and sk > rng.high)


class MemoryTable:
    """Partitions of items, and each GSI's keys; every operation completes without awaiting, so it is atomic.

    A query reads one partition (or one GSI key's entries) and copies only the items it returns.
    """

    def __init__(self) -> None:
        self._partitions: dict[str, dict[str, Item]] = {}
        # index name -> GSI partition key -> the base keys of the items holding both of the index's keys
        self._indexes: dict[str, dict[str, set[tuple[str, str]]]] = {i.name: {} for i in INDEXES}

    def item_count(self) -> int:
        return sum(len(p) for p in self._partitions.values())

    def _find(self, key: tuple[str, str]) -> Item | None:
        partition = self._partitions.get(key[0])
        return partition.get(key[1]) if partition is not None else None

    def _store(self, key: tuple[str, str], item: Item) -> None:
        self._drop(key)
        self._partitions.setdefault(key[0], {})[key[1]] = item
        for index in INDEXES:
            if isinstance(item.get(index.pk), str) and isinstance(item.get(index.sk), str):
                self._indexes[index.name].setdefault(item[index.pk], set()).add(key)

    def _drop(self, key: tuple[str, str]) -> None:
        partition = self._partitions.get(key[0])
        item = partition.pop(key[1], None) if partition is not None else None
        if item is None:
            return
        if not partition:
            del self._partitions[key[0]]
        for index in INDEXES:
            index_pk = item.get(index.pk)
            if not isinstance(index_pk, str):
                continue
            entries = self._indexes[index.name].get(index_pk)
            if entries is not None:
                entries.discard(key)
                if not entries:
                    del self._indexes[index.name][index_pk]

    async def get(self, key: Key) -> Item | None:
        item = self._find((key[PK], key[SK]))
        return copy.deepcopy(item) if item is not None else None

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        found = [self._find((k[PK], k[SK])) for k in keys]
        return [copy.deepcopy(i) for i in found if i is not None]

    async def query(
        self,
        pk: str,
        sk: SkRange | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        start_key: Item | None = None,
    ) -> QueryPage:
        pk_attr, sk_attr = key_attributes(index)
        if index is not None:
            keys = self._indexes[index].get(pk, set())
            candidates = [item for item in (self._find(k) for k in keys) if item is not None]
        else:
            candidates = list(self._partitions.get(pk, {}).values())
        rows = [i for i in candidates if sk_attr in i and _sk_matches(i[sk_attr], sk)]
        rows.sort(key=lambda i: (i[sk_attr], i[PK], i[SK]), reverse=not forward)
        if start_key is not None:
            marker = (start_key[sk_attr], start_key[PK], start_key[SK])
            rows = [
                r
                for r in rows
                if ((r[sk_attr], r[PK], r[SK]) > marker if forward else (r[sk_attr], r[PK], r[SK]) < marker)
            ]
        last_key: Item | None = None
        if limit is not None and len(rows) > limit:
            rows = rows[:limit]
            tail = rows[-1]
            last_key = {PK: tail[PK], SK: tail[SK], sk_attr: tail[sk_attr], pk_attr: tail[pk_attr]}
        return QueryPage(items=[copy.deepcopy(r) for r in rows], last_key=last_key)

    def _check(self, key: tuple[str, str], condition: Condition | None) -> bool:
        return condition is None or condition.holds(self._find(key))

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        key = (item[PK], item[SK])
        if not self._check(key, condition):
            raise ConditionFailed(str(key))
        self._store(key, copy.deepcopy(item))

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        k = (key[PK], key[SK])
        if not self._check(k, condition):
            raise ConditionFailed(str(k))
        item = update.apply(self._find(k) or dict(key))
        self._store(k, item)
        return copy.deepcopy(item)

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        k = (key[PK], key[SK])
        if not self._check(k, condition):
            raise ConditionFailed(str(k))
        self._drop(k)

    async def transact(self, ops: list[WriteOp]) -> None:
        reasons: list[str | None] = []
        for op in ops:
            key = (op.item[PK], op.item[SK]) if isinstance(op, Put) else (op.key[PK], op.key[SK])
            reasons.append(None if self._check(key, op.condition) else "ConditionalCheckFailed")
        if any(reasons):
            raise TransactionFailed(reasons)
        for op in ops:
            if isinstance(op, Put):
                self._store((op.item[PK], op.item[SK]), copy.deepcopy(op.item))
            elif isinstance(op, UpdateOp):
                k = (op.key[PK], op.key[SK])
                self._store(k, op.update.apply(self._find(k) or dict(op.key)))
            elif isinstance(op, Delete):
                self._drop((op.key[PK], op.key[SK]))

    async def batch_delete(self, keys: list[Key]) -> None:
        for k in keys:
            self._drop((k[PK], k[SK]))
