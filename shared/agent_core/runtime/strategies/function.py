"""function: native tool calls (tool_choice auto), executed in parallel, up to maxSteps model calls.

Function -> Prompt fallback: the run continues as ReAct (JSON decisions, no `tools` parameter) when the
provider rejects the request because of its tools (a 4xx naming tools or functions), or when the model's
tool-call arguments cannot be parsed in two steps in a row. Each fallback is a `run.warning` and a
`StrategyFallbacks` metric.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from agent_core.domain.events import Event, RunWarning
from agent_core.domain.models import Role, ToolCall
from agent_core.errors import LlmRejectedTools
from agent_core.observability import NAMESPACE, logger
from agent_core.runtime.composer import progressive, settle_answer
from agent_core.runtime.strategies.common import close_at_max_steps

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

UNPARSABLE_STEPS = 2  # consecutive steps with unparsable arguments before falling back


async def function_strategy(r: TurnRunner) -> AsyncIterator[Event]:
    yield r.route("function", "function calling")
    async for event in function_loop(r):
        yield event


def unparsable(arguments: str) -> bool:
    """Arguments that are not a JSON object (empty means no arguments, which is fine)."""
    if not arguments.strip():
        return False
    try:
        return not isinstance(json.loads(arguments), dict)
    except ValueError:
        return True


async def function_loop(
    r: TurnRunner, *, raw: bool = False, lead: str = "", compose: bool = True
) -> AsyncIterator[Event]:
    """Model steps offering the agent's tools until one answers without calling any.

    The window includes what the run already did (quick-rule calls, earlier steps). With `raw` (the
    chain's tool branch) nothing the model writes is streamed: the last text is kept in `r.raw_result`
    for the enhancement call. `lead` is streamed before the first step's text (a separator after
    earlier answer parts); `compose=False` keeps progressive composition out (it is already running).
    """
    tools = r.toolset.schemas()
    bad_steps = 0
    for step in range(r.agent.max_steps):
        r.cancel.raise_if_cancelled()
        try:
            first_lead = "" if step else lead
            async for event in r.model_step(r.window(), tools=tools, forward_content=not raw, lead=first_lead):
                yield event
        except LlmRejectedTools as rejected:
            async for event in fall_back(r, "tools_rejected", rejected.message, raw=raw):
                yield event
            return
        assert r.last is not None
        step_result = r.last
        if not tools:  # nothing was offered: calls the model makes anyway are not run
            async for event in settle_answer(r, loop=False, raw=raw):
                yield event
            return
        ends = step_result.end_calls()
        if not ends:
            if raw:
                r.raw_result = step_result.text()
            else:
                r.answer(step_result.text())
            return
        client = r.turn.request.client_tools
        if client and not raw and any(call.name in client for call, _ in ends):
            async for event in _hand_over(r, ends, step_result.text()):
                yield event
            return
        async for event in r.end_calls(ends):
            yield event
        calls = [call for call, _ in ends]
        if r.agent.compose == "progressive" and compose and not raw:
            async for event in progressive(r, calls, content=step_result.text()):
                yield event
            return
        async for event in r.run_calls(calls, content=step_result.text()):
            yield event
        bad_steps = bad_steps + 1 if any(unparsable(call.arguments) for call in calls) else 0
        if bad_steps >= UNPARSABLE_STEPS:
            reason = f"tool-call arguments could not be parsed in {bad_steps} steps in a row"
            async for event in fall_back(r, "tool_arguments_unparsable", reason, raw=raw):
                yield event
            return
    async for event in close_at_max_steps(r):
        yield event


async def fall_back(r: TurnRunner, code: str, reason: str, *, raw: bool) -> AsyncIterator[Event]:
    """Function -> Prompt: the same run continues as ReAct, with a warning and a metric."""
    from agent_core.runtime.strategies.react import react_loop

    count_fallback(code)
    yield RunWarning(code=code, message=f"falling back to the prompt strategy (ReAct): {reason}")
    yield r.route("react", f"fallback (Function -> Prompt): {code}")
    async for event in react_loop(r, emit_final=not raw):
        yield event


def count_fallback(reason: str) -> None:
    try:
        with single_metric(name="StrategyFallbacks", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as m:
            m.add_dimension(name="reason", value=reason)
    except Exception as exc:  # a metric must never break a run
        logger.warning("metric emit failed", extra={"error": str(exc)})


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
