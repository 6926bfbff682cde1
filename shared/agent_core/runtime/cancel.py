"""Cancellation: an in-process signal (same instance) plus a cheap periodic read of the RUN item."""

from __future__ import annotations

import asyncio
import contextlib

from agent_core.observability import logger
from agent_core.store.base import TurnStore

POLL_INTERVAL_S = 0.5
MAX_POLL_INTERVAL_S = 4.0


class RunCancelled(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelRegistry:
    """Runs live in this process, by run id: a cancel request reaches them at once."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def register(self, run_id: str) -> asyncio.Event:
        return self._events.setdefault(run_id, asyncio.Event())

    def unregister(self, run_id: str) -> None:
        self._events.pop(run_id, None)

    def signal(self, run_id: str) -> bool:
        event = self._events.get(run_id)
        if event is None:
            return False
        event.set()
        return True


class CancelWatch:
    """One per run: `event` is set by a local cancel at once, or by the store flag within ~0.5 s."""

    def __init__(
        self,
        store: TurnStore,
        chat_id: str,
        run_id: str,
        event: asyncio.Event,
        *,
        poll_s: float = POLL_INTERVAL_S,
        max_poll_s: float = MAX_POLL_INTERVAL_S,
    ) -> None:
        self._store = store
        self._poll_s = poll_s
        self._max_poll_s = max_poll_s
        self._chat_id = chat_id
        self._run_id = run_id
        self.event = event
        self.reason = "cancel_requested"
        self._task: asyncio.Task[None] | None = None
        self.failed_reads = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name=f"cancel-watch-{self._run_id}")

    async def _watch(self) -> None:
        # One cheap read of the RUN item per interval, never one per delta; a fast turn reads nothing.
        # A failed read is logged and the watch goes on, backing off while reads keep failing.
        interval = self._poll_s
        while not self.event.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.event.wait(), interval)
                return
            try:
                requested = await self._store.is_cancel_requested(self._chat_id, self._run_id)
            except Exception as exc:
                self.failed_reads += 1
                interval = min(interval * 2, self._max_poll_s)
                logger.warning("cancel watch read failed", extra={"runId": self._run_id, "error": type(exc).__name__})
                continue
            interval = self._poll_s
            if requested:
                self.event.set()

    def raise_if_cancelled(self) -> None:
        if self.event.is_set():
            raise RunCancelled(self.reason)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
