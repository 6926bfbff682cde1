"""function: native tool calls (tool_choice auto), executed in parallel, up to maxSteps model calls.

Function -> Prompt fallback: the run continues as ReAct (JSON decisions, no `tools` parameter) when the
provider rejects the request because of its tools (a 4xx naming tools or functions), or when the model's
tool-call arguments cannot be parsed in two steps in a row. Each fallback is a `run.warning` and a
`StrategyFallbacks` metric.

The answers the loop composes live here too, as they continue into it: `settle_answer` (a call that
offered no tools returned calls anyway) and `progressive` (one answer part per tool as it completes).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from agent_core.domain.events import Event, RunRoute, RunWarning
from agent_core.domain.models import ToolCall
from agent_core.errors import LlmRejectedTools
from agent_core.observability import NAMESPACE, logger
from agent_core.runtime.composer import part_messages, separator
from agent_core.runtime.next_step import Draft, FinalAnswer, NextStep, RunAgain, Steps, WaitForClient, with_preface
from agent_core.runtime.replies import filler_line, unoffered_tools
from agent_core.runtime.run_protocol import AgentRun, ModelStep
from agent_core.runtime.strategies.common import close_at_max_steps
from agent_core.runtime.strategies.react import react_loop
from agent_core.tools.service import ToolExecution

UNPARSABLE_STEPS = 2  # consecutive steps with unparsable arguments before falling back


async def function_strategy(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    yield RunRoute(mode="function", reason="function calling")
    async for item in function_loop(r):
        yield item


def unparsable(arguments: str) -> bool:
    """Arguments that are not a JSON object (empty means no arguments, which is fine)."""
    if not arguments.strip():
        return False
    try:
        return not isinstance(json.loads(arguments), dict)
    except ValueError:
        return True


async def function_loop(
    r: AgentRun, *, draft: bool = False, lead: str = "", compose: bool = True
) -> AsyncIterator[Event | NextStep]:
    """Model steps offering the agent's tools until one answers without calling any.

    The window includes what the run already did (quick-rule calls, earlier steps). With `draft` (the
    chain's tool branch) nothing the model writes is streamed: the last text ends the loop as a `Draft` for
    the enhancement call. `lead` is streamed before the first step's text (a separator after
    earlier answer parts); `compose=False` keeps progressive composition out (it is already running).
    """
    tools = r.toolset.schemas()
    bad_steps = 0
    for step in range(r.agent.max_steps):
        r.check_cancelled()
        first_lead = "" if step else lead
        step_result = r.model_step(r.window(), tools=tools, forward_content=not draft, lead=first_lead)
        try:
            async for event in step_result:
                yield event
        except LlmRejectedTools as rejected:
            async for item in fall_back(r, "tools_rejected", rejected.message, draft=draft):
                yield item
            return
        if not tools:  # nothing was offered: calls the model makes anyway are not run
            async for item in settle_answer(r, step_result, loop=False, draft=draft):
                yield item
            return
        ends = step_result.end_calls()
        if not ends:
            yield Draft(step_result.text()) if draft else FinalAnswer(step_result.text())
            return
        if not draft and any(r.hands_over(call) for call, _ in ends):
            async for item in _hand_over(r, ends, step_result.text()):
                yield item
            return
        async for event in r.end_calls(ends):
            yield event
        calls = [call for call, _ in ends]
        if r.agent.compose == "progressive" and compose and not draft:
            async for item in progressive(r, calls, content=step_result.text()):
                yield item
            return
        async for event in r.run_calls(calls, content=step_result.text()):
            yield event
        bad_steps = bad_steps + 1 if any(unparsable(call.arguments) for call in calls) else 0
        if bad_steps >= UNPARSABLE_STEPS:
            reason = f"tool-call arguments could not be parsed in {bad_steps} steps in a row"
            async for item in fall_back(r, "tool_arguments_unparsable", reason, draft=draft):
                yield item
            return
    async for item in close_at_max_steps(r, draft=draft):
        yield item


async def fall_back(r: AgentRun, code: str, reason: str, *, draft: bool) -> AsyncIterator[Event | NextStep]:
    """Function -> Prompt: the same run continues as ReAct, with a warning and a metric."""
    count_fallback(code)
    yield RunWarning(code=code, message=f"falling back to the prompt strategy (ReAct): {reason}")
    yield RunRoute(mode="react", reason=f"fallback (Function -> Prompt): {code}")
    yield RunAgain(lambda run: react_loop(run, draft=draft), f"fallback (Function -> Prompt): {code}")


def count_fallback(reason: str) -> None:
    try:
        with single_metric(name="StrategyFallbacks", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as m:
            m.add_dimension(name="reason", value=reason)
    except Exception as exc:  # a metric must never break a run
        logger.warning("metric emit failed", extra={"error": str(exc)})


async def _hand_over(r: AgentRun, ends: list[tuple[ToolCall, Event]], text: str) -> AsyncIterator[Event | NextStep]:
    """The model called tools the caller runs itself (or decides later: approvals handed over): the run ends
    here with finishReason `tool_calls`.

    Server-side calls of the same step still run first, so every call in the history but the caller's
    has its result; the caller's outputs (or decisions) arrive with its next request. A handed-over approval
    has its WAIT item opened and its `tool.approval` sent (`end_calls`).
    """
    handed = [(call, end) for call, end in ends if r.hands_over(call)]
    server = [(call, end) for call, end in ends if not r.hands_over(call)]
    async for event in r.end_calls(handed, handed=True):
        yield event
    async for event in r.end_calls(server):
        yield event
    if server:
        async for event in r.run_calls([call for call, _ in server], content=text):
            yield event
    yield WaitForClient(text, tuple(call for call, _ in handed), stored="" if server else text)


async def settle_answer(
    r: AgentRun, step: ModelStep, *, loop: bool = True, draft: bool = False
) -> AsyncIterator[Event | NextStep]:
    """The answer of a call that offered no tools; tool calls it returned anyway are handled, never dangling.

    Their events were not forwarded. A `run.warning` names them; when the model wrote no text and the
    agent has tools, the run continues in the tool loop (tools offered) so the calls go through the
    normal path; otherwise the text (or a short note naming the tools) is the answer.
    """
    text = step.text()
    names = list(dict.fromkeys(call.name for call in step.tool_calls()))
    if names:
        message = f"the model called {', '.join(names)} in a call that offered no tools"
        yield RunWarning(code="unoffered_tool_calls", message=message)
        if loop and not text and r.toolset.schemas():
            yield RunAgain(lambda run: function_loop(run, draft=draft), "the calls go through the tool loop")
            return
    if draft:
        yield Draft(text)
        return
    if not text and names:
        text = unoffered_tools(r.message, names)
        async for event in r.text_block(text):
            yield event
    yield FinalAnswer(text)


async def answer_step(r: AgentRun, messages: list[dict[str, Any]]) -> AsyncIterator[Event | NextStep]:
    """One streamed answer call offering no tools (direct answers, the history answer)."""
    step = r.model_step(messages)
    async for event in step:
        yield event
    async for item in settle_answer(r, step):
        yield item


async def progressive(r: AgentRun, calls: list[ToolCall], *, content: str = "") -> AsyncIterator[Event | NextStep]:
    """A filler line at once, then one streamed answer part per tool as it completes (fastest first).

    Parts are separate paragraphs: each part after the first starts with a paragraph break (streamed as
    its first delta), so a client that concatenates the deltas reads prose in any language. The last
    part's call offers the agent's tools: calls it makes run through the function loop, whose answer
    follows the parts.
    """
    filler = filler_line(r.message)
    parts = [filler]
    follow_up: list[tuple[ToolCall, Event]] = []
    async for event in r.text_block(filler):
        yield event
    results = 0

    async def on_result(execution: ToolExecution) -> AsyncIterator[Event]:
        nonlocal results
        results += 1
        tools = r.toolset.schemas() if results == len(calls) else None
        messages = part_messages(r, execution, first=len(parts) == 1)
        step = r.model_step(messages, tools=tools, lead=separator(parts[-1]))
        async for event in step:
            yield event
        if step.text().strip():
            parts.append(step.text())
        if tools:
            follow_up.extend(step.end_calls())
        elif step.tool_calls():
            message = "an answer part called tools in a call that offered none"
            yield RunWarning(code="unoffered_tool_calls", message=message)

    async for event in r.run_calls(calls, content=content, on_result=on_result):
        yield event
    text = "".join(parts).rstrip()
    if not follow_up:
        yield FinalAnswer(text)
        return
    async for event in r.end_calls(follow_up):
        yield event
    async for event in r.run_calls([call for call, _ in follow_up], content=text):
        yield event
    tail = Steps(r, lambda run: function_loop(run, lead=separator(text), compose=False))
    async for event in tail:
        yield event
    yield with_preface(tail.step, text)
