"""The pieces answers are composed of: filler and transition lines, answer-part prompts, and enhancement.

The loops that use them (settling an answer, progressive parts as tools finish) are in
`strategies/function.py`, beside the tool loop they continue into.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.events import Event, FinishReason
from agent_core.runtime.next_step import FinalAnswer, NextStep
from agent_core.runtime.replies import transition
from agent_core.runtime.run_protocol import AgentRun
from agent_core.tools.service import ToolExecution

RAW_RESULT = "Raw result:\n"
ENHANCE_PROMPT = (
    "Rewrite the raw result below as the final answer to the user's question: clear, well-structured "
    "Markdown in the user's language. Keep every fact; add nothing that is not in the result."
)


def part_messages(r: AgentRun, execution: ToolExecution, first: bool) -> list[dict[str, Any]]:
    call = execution.call
    pair: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": execution.model_content()},
    ]
    lead = "" if first else f' Begin with a short transition such as "{transition(r.message)}".'
    instruction = (
        "Answer the part of the user's question that this one tool result covers, briefly; other results "
        f"may follow separately.{lead}"
    )
    return [*r.window(include_run=False), *pair, {"role": "system", "content": instruction}]


def separator(previous: str) -> str:
    """What goes between two answer parts so they read as prose: a paragraph break unless one is there."""
    return "" if not previous or previous[-1].isspace() else "\n\n"


async def enhance(r: AgentRun, raw: str, finish_reason: FinishReason = "stop") -> AsyncIterator[Event | NextStep]:
    """One more streamed call (no tools offered) that turns a raw result into the user-facing Markdown answer."""
    messages = [
        {"role": "system", "content": ENHANCE_PROMPT},
        {"role": "user", "content": f"Question:\n{r.message}\n\n{RAW_RESULT}{raw}"},
    ]
    step = r.model_step(messages, purpose="enhance")
    async for event in step:
        yield event
    text = step.text()
    if not text:  # nothing came back as text (e.g. an unoffered tool call): the raw result is the answer
        async for event in r.text_block(raw):
            yield event
    yield FinalAnswer(text or raw, finish_reason)
