"""The run lease heartbeat: while a run lives, its chat's lease is renewed every third of its length.

A streamed turn may run up to the stream deadline (a frontend tool alone may wait minutes) while the lease
is short, so that a dead run's chat frees itself soon. Each renewal is conditional on the lease still
being this run's; a failed renewal is logged and tried again sooner, a lost lease ends the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from agent_core.observability import logger
from agent_core.store.base import TurnStore


class LeaseKeeper:
    def __init__(self, store: TurnStore, chat_id: str, run_id: str, lease_ms: int, clock: Callable[[], int]) -> None:
        self._store = store
        self._chat_id = chat_id
        self._run_id = run_id
        self._lease_ms = lease_ms
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self._lease_ms > 0:
            self._task = asyncio.create_task(self._beat(), name=f"lease-{self._run_id}")

    async def _beat(self) -> None:
        interval = self._lease_ms / 3 / 1000
        delay = interval
        while True:
            await asyncio.sleep(delay)
            try:
                kept = await self._store.renew_lease(self._chat_id, self._run_id, self._clock() + self._lease_ms)
            except Exception as exc:
                # Two more tries fit before the lease runs out.
                logger.warning("lease renewal failed", extra={"runId": self._run_id, "error": type(exc).__name__})
                delay = interval / 3
                continue
            if not kept:
                logger.warning("run lease lost to another run", extra={"runId": self._run_id})
                return
            delay = interval

    async def stop(self) -> None:
        """No renewal starts after this returns (the run is about to release the lease)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
