"""chain: intent analysis -> a direct answer, or the tool branch then response enhancement.

- Intent: one call (no tools) answering `{"mode": "direct" | "react", "reason"}`; it is the routing, so
  quick rules and the history fast path are not consulted in this mode.
- Direct: the answer streams token by token from one call (two LLM calls in all), not enhanced.
- Tool branch, run per the agent's `strategy`: `prompt` (ReAct JSON decisions, the default) or
  `function` (native tool calls, with the Function -> Prompt fallback). Tool events (and `react.step`
  with reactVerbose) stream; the branch's own text does not. The enhancement call then streams the
  final answer. A branch that ends at user_input has answered already: no enhancement. A branch that runs
  out of maxSteps hands over what its tools gathered: the enhancement call answers from it (no tools
  offered) and the run finishes with `max_steps`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.events import Event, RunRoute
from agent_core.runtime.composer import enhance
from agent_core.runtime.decisions import DecisionError, parse_intent
from agent_core.runtime.next_step import Draft, NextStep, Steps
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.function import function_loop, settle_answer
from agent_core.runtime.strategies.react import react_loop

INTENT_PROMPT = (
    "Decide how to handle the user's last message. Answer with ONE JSON object: "
    '{"mode": "direct" | "react", "reason": "<short reason>"}. '
    "Use react when tools are needed ({tools}); direct when you can answer from knowledge and the conversation."
)


async def chain_strategy(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    names = ", ".join(r.toolset.names) or "none available"
    messages = [*r.window(include_run=False), {"role": "system", "content": INTENT_PROMPT.replace("{tools}", names)}]
    intent = r.model_step(messages, forward_content=False, purpose="intent")
    async for event in intent:
        yield event
    try:
        mode, reason = parse_intent(intent.text())
    except DecisionError as error:
        mode, reason = "react", f"intent unclear ({error}); using the tool branch"
        if intent.tool_calls():
            reason = "the intent call asked for tools"
    yield RunRoute(mode="chain", reason=f"{mode}: {reason}".strip())
    if mode == "direct":
        step = r.model_step(r.window())
        async for event in step:
            yield event
        if step.text() or not step.tool_calls():
            async for item in settle_answer(r, step, loop=False):
                yield item
            return
        yield RunRoute(mode="chain", reason="react: the direct answer asked for tools")
    branch = Steps(r, tool_branch)
    async for event in branch:
        yield event
    if not isinstance(branch.step, Draft):  # the branch answered already (user_input, nothing gathered)
        yield branch.ending()
        return
    async for item in enhance(r, branch.step.text, branch.step.finish_reason):
        yield item


def tool_branch(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    """The tool loop per the agent's `strategy`, as a draft: it ends with a `Draft` unless it answered."""
    return function_loop(r, draft=True) if r.agent.strategy == "function" else react_loop(r, draft=True)
