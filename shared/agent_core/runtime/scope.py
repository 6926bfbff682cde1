"""A run's scope: its deadline, cancellation, lease and MCP session, acquired and released as one.

`async with RunScope(turn) as scope:` starts watching for cancellation and renewing the lease; leaving it
stops both, forgets the run's local cancel handle and closes the MCP session (whatever ended the run: an
answer, an error, or a client that went away). Inside, `next_item` and `guarded` wait under the deadline and
cancellation: the first of the item, a cancel, or the deadline wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import TypeVar

from agent_core.domain.ids import now_ms as wall_ms
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.cancel import CancelWatch, RunCancelled
from agent_core.runtime.lease import LeaseKeeper
from agent_core.runtime.turn import PreparedTurn
from agent_core.tools.base import Tool
from agent_core.tools.mcp import McpRun, McpWarning

T = TypeVar("T")


LEASE_TAKEN = "lease_taken"  # the cancel reason of a run another process continued


class DeadlineReached(Exception):
    """The turn deadline passed: the turn ends with run.error `deadline_exceeded`."""


class RunScope:
    """The deadline, cancel watch, lease and MCP session of one run."""

    def __init__(self, turn: PreparedTurn) -> None:
        deps, run, s = turn.deps, turn.run, turn.deps.settings
        self._turn = turn
        self.started = time.monotonic()
        # Buffered routes pass their own deadline; streams get the stream deadline (below Lambda's limit).
        deadline_ms = turn.request.deadline_ms or s.stream_deadline_ms
        self.deadline = self.started + deadline_ms / 1000 if deadline_ms else None
        local = deps.cancels.register(run.run_id)
        self.cancel = CancelWatch(deps.turns, run.chat_id, run.run_id, local)
        self.lease = LeaseKeeper(
            deps.turns,
            run.chat_id,
            run.run_id,
            s.run_heartbeat_ms,
            s.run_lease_ms,
            wall_ms,
            holder=run.lease_holder,
            on_lost=self._lease_lost,
        )
        self._mcp: McpRun | None = None

    async def __aenter__(self) -> RunScope:
        self.cancel.start()
        self.lease.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.lease.stop()
        await self.cancel.stop()
        self._turn.deps.cancels.unregister(self._turn.run.run_id)
        if self._mcp is not None:
            await self._mcp.aclose()

    async def _lease_lost(self) -> None:
        """The run's lease is no longer this process's: when the run still holds its chat, another process
        continued it from its checkpoint, and it stops here (its end is that process's to store)."""
        run = self._turn.run
        chat = await self._turn.deps.chats.get_chat(run.chat_id, run.user_id)
        if chat is not None and chat.active_run_id == run.run_id:
            self._turn.deps.cancels.signal(run.run_id, LEASE_TAKEN)

    async def mcp_tools(self, agent: AgentDefinition) -> tuple[list[Tool], list[McpWarning]] | None:
        """The agent's MCP tools and warnings (one session, closed with the scope); None without MCP servers."""
        mcp = self._turn.deps.mcp
        if not agent.mcp_servers or mcp is None:
            return None
        self._mcp = mcp.run(agent.mcp_servers)
        return await self.guarded(self._mcp.tools())

    async def next_item(self, iterator: AsyncIterator[T]) -> T:
        """The next item, unless the run is cancelled or the deadline passes first."""
        self.cancel.raise_if_cancelled()
        remaining = None if self.deadline is None else self.deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise DeadlineReached
        item = asyncio.ensure_future(anext(iterator))
        stop = asyncio.ensure_future(self.cancel.event.wait())
        try:
            done, _ = await asyncio.wait({item, stop}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller went away: stop reading so the iterator can be closed cleanly afterwards.
            item.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await item
            raise
        finally:
            stop.cancel()
        if item in done:
            return item.result()
        item.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
            await item
        if self.cancel.event.is_set():
            raise RunCancelled(self.cancel.cancel_reason)
        raise DeadlineReached

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        """Await one thing under the same deadline and cancellation rules."""

        async def once() -> AsyncIterator[T]:
            yield await awaitable

        return await self.next_item(once())

    def check_cancelled(self) -> None:
        self.cancel.raise_if_cancelled()
