"""The run lease heartbeat: while a run lives, its chat's lease is renewed every `AGENT_RUN_HEARTBEAT_MS`.

A streamed turn may run up to the stream deadline (a frontend tool alone may wait minutes) while the lease
is short: each renewal sets its expiry to 2.5 heartbeats from now (`Settings.run_lease_ms`), so a run
whose process died (it misses two renewals) frees its chat soon, and the run's own deadline stays
separate. Each renewal is conditional on the lease still being this run's, held by this process; a failed
renewal is logged and tried again sooner, a lost lease ends the heartbeat. A lease lost while the run still
holds its chat (another process continued the run from its checkpoint after this one missed its renewals)
calls `on_lost`: the run stops here (runtime/continuation.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from agent_core.observability import logger
from agent_core.store.base import TurnStore


class LeaseKeeper:
    def __init__(
        self,
        store: TurnStore,
        chat_id: str,
        run_id: str,
        heartbeat_ms: int,
        lease_ms: int,
        clock: Callable[[], int],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        holder: str | None = None,
        on_lost: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._chat_id = chat_id
        self._run_id = run_id
        self._heartbeat_ms = heartbeat_ms
        self._lease_ms = lease_ms
        self._clock = clock
        self._sleep = sleep
        self._holder = holder  # the token of a process that continued the run (None: its first process)
        self._on_lost = on_lost
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self._heartbeat_ms > 0:
            self._task = asyncio.create_task(self.beat(), name=f"lease-{self._run_id}")

    async def beat(self) -> None:
        """Renew until the lease is lost (or the task is cancelled by `stop`)."""
        interval = self._heartbeat_ms / 1000
        delay = interval
        while True:
            await self._sleep(delay)
            try:
                expires_at = self._clock() + self._lease_ms
                kept = await self._store.renew_lease(self._chat_id, self._run_id, expires_at, self._holder)
            except Exception as exc:
                # Several more tries fit before the lease (2.5 heartbeats) runs out.
                logger.warning("lease renewal failed", extra={"runId": self._run_id, "error": type(exc).__name__})
                delay = interval / 3
                continue
            if not kept:
                logger.warning("run lease lost to another run", extra={"runId": self._run_id})
                if self._on_lost is not None:
                    await self._on_lost()
                return
            delay = interval

    async def stop(self) -> None:
        """No renewal starts after this returns (the run is about to release the lease)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
