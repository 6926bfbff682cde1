"""What every strategy shares: the answer when maxSteps runs out (from what the run gathered)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.events import Event
from agent_core.runtime.next_step import Draft, FinalAnswer, NextStep
from agent_core.runtime.replies import max_steps_reached
from agent_core.runtime.run_protocol import AgentRun

MAX_STEPS_PROMPT = (
    "The step budget of this run is spent: no more tools can be called. Answer the user's question now from "
    "the tool results below, and say briefly what they do not cover."
)
GATHERED = "Tool results gathered before the step budget (maxSteps) ran out:\n"


def gathered(r: AgentRun) -> str:
    """This run's tool calls and their results, one line each: `name(arguments) -> result`."""
    base = len(r.window(include_run=False))
    calls: dict[str, str] = {}
    lines: list[str] = []
    for message in r.window()[base:]:
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            calls[str(call.get("id"))] = f"{function.get('name')}({function.get('arguments') or ''})"
        if message.get("role") == "tool":
            lines.append(f"{calls.get(str(message.get('tool_call_id')), 'tool')} -> {message.get('content')}")
    return "\n".join(lines)


def _with_records(window: list[dict[str, Any]], records: str) -> list[dict[str, Any]]:
    """The window with a system message of records before the user's question (as the history answer does)."""
    last_user = max((i for i, m in enumerate(window) if m.get("role") == "user"), default=len(window))
    return [*window[:last_user], {"role": "system", "content": records}, *window[last_user:]]


async def close_at_max_steps(r: AgentRun, *, draft: bool = False) -> AsyncIterator[Event | NextStep]:
    """The step budget ran out: answer from what the run gathered, in one call that offers no tools.

    In chain's tool branch (`draft`), the gathered results are the `Draft` its enhancement call rewrites.
    The run finishes with `max_steps` either way; with nothing gathered, or no text from the model, the
    closing message (streamed) says the budget ran out and is the answer.
    """
    found = gathered(r)
    if draft and found:
        yield Draft(GATHERED + found, "max_steps")
        return
    text = ""
    if found:
        r.check_cancelled()
        records = f"{MAX_STEPS_PROMPT}\n\n{GATHERED}{found}"
        step = r.model_step(_with_records(r.window(include_run=False), records))
        async for event in step:
            yield event
        text = step.text()
    if not text.strip():
        text = max_steps_reached(r.message, r.agent.max_steps)
        async for event in r.text_block(text):
            yield event
    yield FinalAnswer(text, "max_steps")
