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


CANCEL_REQUESTED = "cancel_requested"
SERVER_STOPPING = "server_stopping"  # the local server is shutting down (Ctrl-C on `make run`)


class CancelSignal(asyncio.Event):
    """A run's in-process cancel, with the reason its `run.cancel` gives."""

    reason = CANCEL_REQUESTED


class CancelRegistry:
    """Runs live in this process, by run id: a cancel request reaches them at once."""

    def __init__(self) -> None:
        self._events: dict[str, CancelSignal] = {}

    def register(self, run_id: str) -> CancelSignal:
        return self._events.setdefault(run_id, CancelSignal())

    def unregister(self, run_id: str) -> None:
        self._events.pop(run_id, None)

    def signal(self, run_id: str, reason: str = CANCEL_REQUESTED) -> bool:
        event = self._events.get(run_id)
        if event is None:
            return False
        if not event.is_set():
            event.reason = reason
        event.set()
        return True

    def signal_all(self, reason: str) -> int:
        """Cancel every run of this process (the server is stopping); how many there were."""
        for run_id in list(self._events):
            self.signal(run_id, reason)
        return len(self._events)


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
        self.reason = CANCEL_REQUESTED  # a store flag's reason; a local signal carries its own
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
            raise RunCancelled(self.cancel_reason)

    @property
    def cancel_reason(self) -> str:
        return self.event.reason if isinstance(self.event, CancelSignal) else self.reason

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
