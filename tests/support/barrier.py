"""A table whose chosen writes wait for each other: every racing attempt has done all it does before its write
when the first such write lands (a deterministic race, no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_core.store.table import Condition, Item, Put, Table, WriteOp


class BarrierTable:
    """Delegates to `table`; puts (alone or in a transaction) of items `gated(item)` selects wait until `parties`
    of them have arrived, then commit one at a time (moto's in-process DynamoDB is not thread-safe for
    transactions; DynamoDB serialises conditional writes to one item anyway)."""

    def __init__(self, table: Table, gated: Callable[[Item], bool], parties: int = 2) -> None:
        self._table = table
        self._gated = gated
        self._parties = parties
        self._arrived = 0
        self._all_here = asyncio.Event()
        self._one_at_a_time = asyncio.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    async def _gate(self, items: list[Item]) -> None:
        if not any(self._gated(item) for item in items) or self._all_here.is_set():
            return
        self._arrived += 1
        if self._arrived >= self._parties:
            self._all_here.set()
        await self._all_here.wait()

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        await self._gate([item])
        async with self._one_at_a_time:
            await self._table.put(item, condition)

    async def transact(self, ops: list[WriteOp]) -> None:
        await self._gate([op.item for op in ops if isinstance(op, Put)])
        async with self._one_at_a_time:
            await self._table.transact(ops)
