"""chain: intent analysis -> a direct answer, or the tool branch then response enhancement.

- Intent: one call (no tools) answering `{"mode": "direct" | "react", "reason"}`; it is the routing, so
  quick rules and the history fast path are not consulted in this mode.
- Direct: the answer streams token by token from one call (two LLM calls in all), not enhanced.
- Tool branch, run per the agent's `strategy`: `prompt` (ReAct JSON decisions, the default) or
  `function` (native tool calls, with the Function -> Prompt fallback). Tool events (and `react.step`
  with reactVerbose) stream; the branch's own text does not. The enhancement call then streams the
  final answer. A branch that ends at user_input or maxSteps has answered already: no enhancement.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.runtime.composer import enhance, settle_answer
from agent_core.runtime.decisions import DecisionError, parse_intent

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

INTENT_PROMPT = (
    "Decide how to handle the user's last message. Answer with ONE JSON object: "
    '{"mode": "direct" | "react", "reason": "<short reason>"}. '
    "Use react when tools are needed ({tools}); direct when you can answer from knowledge and the conversation."
)


async def chain_strategy(r: TurnRunner) -> AsyncIterator[Event]:
    names = ", ".join(r.toolset.names) or "none available"
    messages = [*r.window(include_run=False), {"role": "system", "content": INTENT_PROMPT.replace("{tools}", names)}]
    async for event in r.model_step(messages, forward_content=False, purpose="intent"):
        yield event
    assert r.last is not None
    try:
        mode, reason = parse_intent(r.last.text())
    except DecisionError as error:
        mode, reason = "react", f"intent unclear ({error}); using the tool branch"
        if r.last.tool_calls():
            reason = "the intent call asked for tools"
    yield r.route("chain", f"{mode}: {reason}".strip())
    if mode == "direct":
        async for event in r.model_step(r.window()):
            yield event
        assert r.last is not None
        if r.last.text() or not r.last.tool_calls():
            async for event in settle_answer(r, loop=False):
                yield event
            return
        yield r.route("chain", "react: the direct answer asked for tools")
    async for event in tool_branch(r):
        yield event
    if r.raw_result is None:  # the branch already answered (user_input or maxSteps)
        return
    async for event in enhance(r, r.raw_result):
        yield event


async def tool_branch(r: TurnRunner) -> AsyncIterator[Event]:
    """The tool loop per the agent's `strategy`; its final text lands in `r.raw_result`."""
    from agent_core.runtime.strategies.function import function_loop
    from agent_core.runtime.strategies.react import react_loop

    loop = function_loop(r, raw=True) if r.agent.strategy == "function" else react_loop(r, emit_final=False)
    async for event in loop:
        yield event
