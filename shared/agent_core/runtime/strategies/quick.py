"""Calls the run decided itself (quick rules): announce, end, execute in parallel, then answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.events import Event
from agent_core.domain.models import ToolCall
from agent_core.runtime.next_step import NextStep, RunAgain, Strategy
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.function import function_loop, progressive
from agent_core.runtime.strategies.react import react_loop


async def call_tools_then_answer(
    r: AgentRun, calls: list[ToolCall], *, content: str = ""
) -> AsyncIterator[Event | NextStep]:
    """Run the calls, then answer.

    The answer call still offers the agent's tools, so the model can complete what the rules missed:
    a `react` agent continues its ReAct loop with the results as observations, any other agent the
    function loop.
    """
    async for event in r.announce(calls):
        yield event
    async for event in r.end_calls([(c, r.end_event(c)) for c in calls]):
        yield event
    if r.agent.compose == "progressive":
        async for item in progressive(r, calls, content=content):
            yield item
        return
    async for event in r.run_calls(calls, content=content):
        yield event
    if r.agent.mode == "react":
        seeded: Strategy = lambda run: react_loop(run, seed=calls)  # noqa: E731
        yield RunAgain(seeded, "the ReAct loop, the quick calls as its first steps")
        return
    yield RunAgain(function_loop, "the tool loop after the quick calls")
