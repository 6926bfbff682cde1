"""function: native tool calls (tool_choice auto), executed in parallel, up to maxSteps model calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event, RunWarning
from agent_core.errors import LlmRejectedTools
from agent_core.runtime.composer import progressive
from agent_core.runtime.strategies.common import close_at_max_steps

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner


async def function_strategy(r: TurnRunner) -> AsyncIterator[Event]:
    from agent_core.runtime.strategies.react import react_loop

    yield r.route("function", "function calling")
    tools = r.toolset.schemas()
    for step in range(r.agent.max_steps):
        r.cancel.raise_if_cancelled()
        try:
            async for event in r.model_step(r.window(), tools=tools):
                yield event
        except LlmRejectedTools as rejected:
            if step:
                raise
            # The provider cannot do function calling: the same run continues as ReAct.
            yield RunWarning(code="tools_rejected", message=f"falling back to react: {rejected.message}")
            yield r.route("react", "fallback: the model rejected native tools")
            async for event in react_loop(r):
                yield event
            return
        assert r.last is not None
        step_result = r.last
        ends = step_result.end_calls()
        if not ends:
            r.answer(step_result.text())
            return
        async for event in r.end_calls(ends):
            yield event
        calls = [call for call, _ in ends]
        if r.agent.compose == "progressive":
            async for event in progressive(r, calls, content=step_result.text()):
                yield event
            return
        async for event in r.run_calls(calls, content=step_result.text()):
            yield event
    async for event in close_at_max_steps(r):
        yield event
