"""A prepared turn handed to a streaming response, which settles it however the response ends.

A turn holds its chat's lease and has stored the user's message before the response starts. The response
runs the turn's events in a task of their own (api/sse.py `Detached`), so the run does not depend on its
client: one that leaves (before the first byte or mid-stream) stops receiving, and the run goes on to its
end. `settle` waits until that end is stored, so the response does not finish while the lease is held (in
Lambda nothing runs after the response). Only a turn whose events never started at all (its task cancelled
before its first step: the server stopping) is ended here, `cancelled` with the reason given, its lease
freed at once instead of at its expiry (`Settings.run_lease_ms`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Protocol, cast

from agent_core.domain.events import RunCancel
from agent_core.domain.models import RunStatus
from agent_core.runtime.approvals import undo
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.loop import DISCONNECTED, TurnRunner
from agent_core.runtime.release import release_run
from agent_core.runtime.turn import PreparedTurn


class HeldTurn(Protocol):
    """What a streaming response holds for its turn."""

    async def settle(self) -> None:
        """Release the turn if its events never started; else wait until its end is stored."""


class PendingTurn:
    """The turn's events (`events()`); once they are iterated the run owns its end."""

    def __init__(self, prepared: PreparedTurn) -> None:
        self.prepared = prepared
        self.started = False
        self.ended = asyncio.Event()

    async def events(self) -> AsyncGenerator[Envelope, None]:
        # Set in the same step that enters the run's own try/finally: no suspension point between them.
        self.started = True
        try:
            envelopes = cast(AsyncGenerator[Envelope, None], TurnRunner(self.prepared).events())
            async with contextlib.aclosing(envelopes):
                async for envelope in envelopes:
                    yield envelope
        finally:
            self.ended.set()

    async def settle(self) -> None:
        if self.started:
            await self.ended.wait()
            return
        self.started = True
        await release_unstarted_turn(self.prepared, DISCONNECTED)
        self.ended.set()


async def release_unstarted_turn(turn: PreparedTurn, reason: str) -> None:
    """A prepared turn whose events never started (its client left before the first byte): the run ends
    cancelled, as a disconnect mid-stream ends it, with a replay of its question; its lease is freed."""
    run = turn.run
    run.status, run.result = RunStatus.CANCELLED, None
    await release_run(turn.deps, run, RunCancel(reason=reason), turn.clock_ms(), turn.request.stored_message)
    await undo(turn.deps.waits, turn.request.decided)  # the calls its request decided never ran: asked again
