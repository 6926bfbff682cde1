"""Routing, in every mode: the time-query fast path, then quick rules, else the agent's strategy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.runtime.composer import call_tools_then_answer
from agent_core.runtime.strategies import STRATEGIES

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner


async def route_and_run(r: TurnRunner) -> AsyncIterator[Event]:
    mode = r.agent.mode
    for warning in r.warnings:
        yield warning
    fast = r.turn.fast_path
    if fast is not None:
        async for event in fast(r):
            yield event
        return
    matches = r.toolset.quick_calls(r.message)
    if matches:
        calls = r.self_made_calls("quick", matches)
        yield r.route(mode, "quick rule matched", [c.name for c in calls])
        async for event in call_tools_then_answer(r, calls):
            yield event
        return
    async for event in STRATEGIES[mode](r):
        yield event
