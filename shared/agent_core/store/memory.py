"""In-memory table: the same semantics as DynamoDB for the operations the Store uses.

Used by tests and by store:false requests (a request-scoped store that writes nothing durable).
"""

from __future__ import annotations

import copy

from agent_core.store.schema import INDEXES, PK, SK
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
    """A dict of partitions; every operation completes without awaiting, so it is atomic."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Item] = {}

    def item_count(self) -> int:
        return len(self._items)

    async def get(self, key: Key) -> Item | None:
        item = self._items.get((key[PK], key[SK]))
        return copy.deepcopy(item) if item is not None else None

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        found = [self._items.get((k[PK], k[SK])) for k in keys]
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
        pk_attr, sk_attr = PK, SK
        if index is not None:
            spec = next(i for i in INDEXES if i.name == index)
            pk_attr, sk_attr = spec.pk, spec.sk
        rows = [
            i for i in self._items.values() if i.get(pk_attr) == pk and sk_attr in i and _sk_matches(i[sk_attr], sk)
        ]
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
        return condition is None or condition.holds(self._items.get(key))

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        key = (item[PK], item[SK])
        if not self._check(key, condition):
            raise ConditionFailed(str(key))
        self._items[key] = copy.deepcopy(item)

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        k = (key[PK], key[SK])
        if not self._check(k, condition):
            raise ConditionFailed(str(k))
        item = update.apply(self._items.get(k) or dict(key))
        self._items[k] = item
        return copy.deepcopy(item)

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        k = (key[PK], key[SK])
        if not self._check(k, condition):
            raise ConditionFailed(str(k))
        self._items.pop(k, None)

    async def transact(self, ops: list[WriteOp]) -> None:
        reasons: list[str | None] = []
        for op in ops:
            key = (op.item[PK], op.item[SK]) if isinstance(op, Put) else (op.key[PK], op.key[SK])
            reasons.append(None if self._check(key, op.condition) else "ConditionalCheckFailed")
        if any(reasons):
            raise TransactionFailed(reasons)
        for op in ops:
            if isinstance(op, Put):
                self._items[(op.item[PK], op.item[SK])] = copy.deepcopy(op.item)
            elif isinstance(op, UpdateOp):
                k = (op.key[PK], op.key[SK])
                self._items[k] = op.update.apply(self._items.get(k) or dict(op.key))
            elif isinstance(op, Delete):
                self._items.pop((op.key[PK], op.key[SK]), None)

    async def batch_delete(self, keys: list[Key]) -> None:
        for k in keys:
            self._items.pop((k[PK], k[SK]), None)
