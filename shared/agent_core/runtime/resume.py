"""Resuming a run's stream from its durable log (store/run_log.py), on any instance.

`open_resume` checks what has an HTTP status before a stream starts (an unknown or foreign run: 404; a
finished run whose log is gone and whose replay cannot stand in for what is missing: 410
`resume_unavailable`) and returns the native events after seq `after`: those the log holds, then the live
run's as they are written (the log polled, from `POLL_START_S` growing to `POLL_MAX_S`), until its terminal
event. A run that ended without its log reaching its terminal event (the log failed, or the process running
it died) ends the resumed stream with its stored terminal event when that is exactly the next one, else with
`ResumeBroken` (the wire says it cannot resume: the run's stored replay still shows its end).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.events import TERMINAL_TYPES
from agent_core.domain.models import Run, RunPointer, RunStatus
from agent_core.errors import NotFound, ResumeUnavailable
from agent_core.runtime.event_log import CLOSE_TIMEOUT_S
from agent_core.store.run_log import LogRead, RunLogStore

Wire = dict[str, Any]
POLL_START_S = 0.1
POLL_GROWTH = 1.5
POLL_MAX_S = 1.0
STATUS_EVERY_S = 2.0  # a tail with nothing new reads the run's status this often
ENDED_GRACE_S = CLOSE_TIMEOUT_S + 1.0  # a run seen ended: its last batch may still be on its way


class ResumeBroken(Exception):
    """The log stops short of the run's end (a batch was never written): the stream cannot continue."""


def run_not_found() -> NotFound:
    return NotFound("run not found", param="runId", code="run_not_found")


@dataclass
class ResumeSource:
    """One resumed stream's reads: the log, the run's status and stored end."""

    deps: RunDeps
    pointer: RunPointer
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def log(self) -> RunLogStore | None:
        return self.deps.run_log

    async def read(self, after: int) -> LogRead:
        if self.log is None:
            return LogRead()
        return await self.log.read(self.pointer.run_id, self.pointer.user_id, after, int(time.time()))

    async def log_lives(self) -> bool:
        if self.log is None:
            return False
        return await self.log.lives(self.pointer.run_id, self.pointer.user_id, int(time.time()))

    async def run(self) -> Run | None:
        return await self.deps.turns.get_run(self.pointer.chat_id, self.pointer.run_id)


async def open_resume(deps: RunDeps, run_id: str, user_id: str, after: int) -> AsyncGenerator[Wire, None]:
    """The run's native events after seq `after` (see the module); raises what has an HTTP status first."""
    pointer = await deps.turns.get_run_pointer(run_id, int(time.time()))
    if pointer is None or pointer.user_id != user_id:
        raise run_not_found()
    events = await log_events(deps, pointer, after)
    if events is not None:
        return events
    run = await deps.turns.get_run(pointer.chat_id, pointer.run_id)
    if run is None:
        raise run_not_found()
    return _from_replay(deps, run, after)


async def log_events(deps: RunDeps, pointer: RunPointer, after: int) -> AsyncGenerator[Wire, None] | None:
    """The run's native events after `after` from its log, then its live ones (`follow`); None when the log
    cannot serve them (a finished run whose log expired, was never written, or misses the next event)."""
    source = ResumeSource(deps, pointer)
    first = await source.read(after)
    if first.gap:
        return None
    if first.events or first.found:
        return follow(source, after, first)
    run = await source.run()
    if run is not None and run.status == RunStatus.RUNNING:
        return follow(source, after, first)  # nothing written yet: the tail waits for it
    if run is not None and await source.log_lives():
        return follow(source, after, first)  # ended, its last batch still on its way: the tail waits for it
    return None


def stored_replay(deps: RunDeps, run: Run) -> AsyncGenerator[Wire, None]:
    """A finished run's events from its first, as its stored replay keeps them (410 when it has none)."""
    return _from_replay(deps, run, 0)


def _from_replay(deps: RunDeps, run: Run, after: int) -> AsyncGenerator[Wire, None]:
    """A finished run whose log cannot serve the stream: its stored replay, when it is exact (the client has
    nothing yet, or everything already), else 410."""
    snapshot = deps.data_links.refresh(run.snapshot or [], run.chat_id)
    last = int(snapshot[-1]["seq"]) if snapshot else 0
    if after == 0 and snapshot:
        return _listed(snapshot)
    if snapshot and after >= last:
        return _listed([])
    message = "the run's event log has expired or is incomplete: its stored replay shows the run (GET /api/ap/chat)"
    raise ResumeUnavailable(message, param="after")


async def _listed(events: list[Wire]) -> AsyncGenerator[Wire, None]:
    for event in events:
        yield event


async def follow(source: ResumeSource, after: int, first: LogRead) -> AsyncGenerator[Wire, None]:
    """The log's events after `after` (starting with `first`), then the live run's, to its terminal event."""
    expected, read = after + 1, first
    delay = POLL_START_S
    checked_at = source.clock()
    ended_at: float | None = None
    while True:
        for event in read.events:
            yield event
            expected = int(event["seq"]) + 1
            if event["type"] in TERMINAL_TYPES:
                return
        if read.gap:
            raise ResumeBroken(f"event {expected} of run {source.pointer.run_id} is not in its log")
        if read.events:
            delay = POLL_START_S
        elif read.ended:  # the client had everything up to the terminal event already
            return
        else:
            now = source.clock()
            if ended_at is None and now - checked_at >= STATUS_EVERY_S:
                checked_at = now
                run = await source.run()
                if run is None or run.status != RunStatus.RUNNING:
                    ended_at = now
            if ended_at is not None and now - ended_at >= ENDED_GRACE_S:
                run = await source.run()
                terminal = _stored_terminal(run, expected)
                if terminal is None:
                    raise ResumeBroken(f"the log of run {source.pointer.run_id} ends before the run did")
                yield terminal
                return
            await source.sleep(delay)
            delay = min(delay * POLL_GROWTH, POLL_MAX_S)
        read = await source.read(expected - 1)


def _stored_terminal(run: Run | None, expected: int) -> Wire | None:
    """The run's stored terminal event when it is exactly the next one the stream needs."""
    if run is None or not run.snapshot:
        return None
    last = run.snapshot[-1]
    if last.get("type") in TERMINAL_TYPES and int(last.get("seq", 0)) == expected:
        return dict(last)
    return None
