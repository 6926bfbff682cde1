"""function: native tool calls (tool_choice auto), executed in parallel, up to maxSteps model calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event, RunWarning
from agent_core.domain.models import Role, ToolCall
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
        client = r.turn.request.client_tools
        if client and any(call.name in client for call, _ in ends):
            async for event in _hand_over(r, ends, step_result.text()):
                yield event
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


async def _hand_over(r: TurnRunner, ends: list[tuple[ToolCall, Event]], text: str) -> AsyncIterator[Event]:
    """The model called tools the caller runs itself: the run ends here with finishReason `tool_calls`.

    Server-side calls of the same step still run first, so every call in the history but the caller's
    has its result; the caller's outputs arrive with its next request.
    """
    client = r.turn.request.client_tools
    server = [(call, end) for call, end in ends if call.name not in client]
    for call, end in ends:
        if call.name in client:
            yield end
    async for event in r.end_calls(server):
        yield event
    if server:
        async for event in r.run_calls([call for call, _ in server], content=text):
            yield event
    handed = [call for call, _ in ends if call.name in client]
    r.save(Role.ASSISTANT, content="" if server else text, tool_calls=handed)
    r.outcome.final_text = text
    r.finish_reason = "tool_calls"
