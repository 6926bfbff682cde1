"""direct: one streamed Markdown answer, no tools."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.events import Event, RunRoute
from agent_core.runtime.next_step import NextStep
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.function import answer_step


async def direct_strategy(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    yield RunRoute(mode="direct", reason="direct answer, no tools")
    async for item in answer_step(r, r.window()):
        yield item
