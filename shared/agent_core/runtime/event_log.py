"""A run's events written to its durable log (store/run_log.py) beside the live stream, never in its way.

`add` only buffers (the live stream never waits for storage); a task of the writer's own writes a batch
when `MAX_BATCH_EVENTS` are waiting or the oldest buffered event is `max_age_s` old
(`Settings.run_log_flush_ms`), and at once for a terminal event or one after which the run waits (a frontend
tool's `tool.end`). The count fills batches while the model streams (a plain answer at 50 tokens/s: one write
per 25 events); the age bounds how stale a resume on another instance can be, and the writes of a slow stream
(at most one per `max_age_s`). The live instance never reads the log: only resumes do. A batch that cannot be
written after a few tries ends the log for this run (`failed`): the run goes on, nothing more is written
(a reader sees the log stop short of the run's end and says it cannot resume). `close` writes what is left;
the run awaits it before it is over (in Lambda nothing runs after the response), bounded by `CLOSE_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from agent_core.domain.events import TERMINAL_TYPES, ToolStart
from agent_core.observability import logger
from agent_core.runtime.envelope import Envelope
from agent_core.store.run_log import MAX_BATCH_EVENTS, RunLogStore, Wire

MAX_AGE_S = 1.0  # Settings.run_log_flush_ms's default
WRITE_TRIES = 3
RETRY_DELAY_S = 0.05
CLOSE_TIMEOUT_S = 5.0


Timer = Callable[[asyncio.Event, float | None], Awaitable[None]]  # until woken, or the delay (None: none)


class EventLogWriter:
    """One run's log: buffered `add`, batched writes in a task, `close` at the run's end."""

    def __init__(
        self,
        log: RunLogStore,
        run_id: str,
        user_id: str,
        *,
        clock_s: Callable[[], float] = time.time,
        max_age_s: float = MAX_AGE_S,
        monotonic: Callable[[], float] = time.monotonic,
        timer: Timer | None = None,
    ) -> None:
        self.log = log
        self.run_id = run_id
        self.user_id = user_id
        self._clock_s = clock_s  # the items' expiry
        self._max_age_s = max_age_s
        self._monotonic = monotonic  # the buffered events' age
        self._timer = timer or _until_woken
        self._buffer: list[Wire] = []
        self._added_at: list[float] = []  # each buffered event's time (`monotonic`)
        self._urgent = False  # a terminal or waiting event is buffered: write everything now
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._frontend: set[str] = set()
        self._writing = 0  # events taken from the buffer whose write has not returned
        self._drained = asyncio.Event()  # set after a write that left nothing buffered
        self.failed = False
        self.writes = 0

    def add(self, envelope: Envelope) -> None:
        """Buffer one sent event (never waits); the writer task is started on the first."""
        if self.failed or self._closing:
            return
        event = envelope.event
        if isinstance(event, ToolStart) and event.tool_type == "frontend":
            self._frontend.add(event.tool_id)
        self._buffer.append(envelope.wire())
        self._added_at.append(self._monotonic())
        waits = envelope.type == "tool.end" and getattr(event, "tool_id", None) in self._frontend
        if envelope.type in TERMINAL_TYPES or waits:
            self._urgent = True
        if len(self._buffer) == 1 or len(self._buffer) >= MAX_BATCH_EVENTS or self._urgent:
            self._wake.set()  # the writer's wait starts with the oldest buffered event; a full batch ends it
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"event-log-{self.run_id}")

    async def _run(self) -> None:
        while True:
            if not self._buffer:
                if self._closing:
                    return
                self._wake.clear()
                await self._timer(self._wake, None)  # until the next event
                continue
            count = self._due()
            if not count:
                self._wake.clear()  # set again only by an urgent event, a full batch or close
                await self._timer(self._wake, self._added_at[0] + self._max_age_s - self._monotonic())
                continue  # woken, or the oldest event's time has come: look again
            batch = self._buffer[:count]
            del self._buffer[:count], self._added_at[:count]
            if not self._buffer:
                self._urgent = False
            self._writing = len(batch)
            written = await self._write(batch)
            self._writing = 0
            if not written:
                self.failed = True
                self._buffer, self._added_at = [], []
                self._drained.set()
                return
            if not self._buffer:
                self._drained.set()

    def _due(self) -> int:
        """How many of the buffered events to write now: all of them for an urgent event, at close, or once
        the oldest is `max_age_s` old; else whole batches only (the rest waits for its own time); else none."""
        if self._urgent or self._closing or self._monotonic() - self._added_at[0] >= self._max_age_s:
            return len(self._buffer)
        return len(self._buffer) // MAX_BATCH_EVENTS * MAX_BATCH_EVENTS

    async def _write(self, batch: list[Wire]) -> bool:
        for attempt in range(WRITE_TRIES):
            try:
                await self.log.append(self.run_id, self.user_id, batch, int(self._clock_s()))
                self.writes += 1
                return True
            except Exception:
                if attempt == WRITE_TRIES - 1:
                    logger.exception("the run's event log could not be written", extra={"runId": self.run_id})
                    return False
                await asyncio.sleep(RETRY_DELAY_S * (attempt + 1))
        return False

    async def flush(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Write every event added so far now; True once the log holds them all (False: it failed, or did not
        answer within `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while not self.failed and (self._buffer or self._writing):
            self._urgent = True
            self._drained.clear()
            self._wake.set()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), remaining)
        return not self.failed

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Write what is buffered, then stop (at most `timeout_s`: a hung store does not hold the run)."""
        self._closing = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if not done:
            task.cancel()
            self.failed = True


async def _until_woken(wake: asyncio.Event, delay_s: float | None) -> None:
    """Until `wake` is set or `delay_s` has passed (None: until `wake`)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), delay_s)
