"""Answers built from tool results: one answer call, progressive parts as tools finish, and enhancement."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agent_core.domain.events import Event
from agent_core.domain.models import ToolCall
from agent_core.tools.service import ToolExecution

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

_CJK = re.compile(r"[\u3400-\u9fff]")
ENHANCE_PROMPT = (
    "Rewrite the raw result below as the final answer to the user's question: clear, well-structured "
    "Markdown in the user's language. Keep every fact; add nothing that is not in the result."
)


def _chinese(text: str) -> bool:
    return bool(_CJK.search(text))


def filler_line(question: str) -> str:
    return "好的，我来逐项查询。\n\n" if _chinese(question) else "Let me look that up.\n\n"


def transition(question: str) -> str:
    return "另外，" if _chinese(question) else "Also, "


async def answer_from_results(r: TurnRunner) -> AsyncIterator[Event]:
    """One streamed model call that answers with the results already in the window (no tools offered)."""
    async for event in r.model_step(r.window()):
        yield event
    assert r.last is not None
    r.answer(r.last.text())


async def call_tools_then_answer(r: TurnRunner, calls: list[ToolCall], *, content: str = "") -> AsyncIterator[Event]:
    """Calls the run decided itself (quick rules): announce, end, execute in parallel, then answer."""
    async for event in r.announce(calls):
        yield event
    async for event in r.end_calls([(c, r.end_event(c)) for c in calls]):
        yield event
    if r.agent.compose == "progressive":
        async for event in progressive(r, calls, content=content):
            yield event
        return
    async for event in r.run_calls(calls, content=content):
        yield event
    async for event in answer_from_results(r):
        yield event


def _part_messages(r: TurnRunner, execution: ToolExecution, first: bool) -> list[dict[str, Any]]:
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


async def progressive(r: TurnRunner, calls: list[ToolCall], *, content: str = "") -> AsyncIterator[Event]:
    """A filler line at once, then one streamed answer part per tool as it completes (fastest first)."""
    filler = filler_line(r.message)
    parts = [filler]
    async for event in r.text_block(filler):
        yield event

    async def on_result(execution: ToolExecution) -> AsyncIterator[Event]:
        async for event in r.model_step(_part_messages(r, execution, first=len(parts) == 1)):
            yield event
        assert r.last is not None
        parts.append(r.last.text())

    async for event in r.run_calls(calls, content=content, on_result=on_result):
        yield event
    r.answer("".join(p if p.endswith("\n") else p + "\n\n" for p in parts).rstrip())


async def enhance(r: TurnRunner, raw: str) -> AsyncIterator[Event]:
    """One more streamed call that turns a raw result into the user-facing Markdown answer."""
    messages = [
        {"role": "system", "content": ENHANCE_PROMPT},
        {"role": "user", "content": f"Question:\n{r.message}\n\nRaw result:\n{raw}"},
    ]
    async for event in r.model_step(messages):
        yield event
    assert r.last is not None
    r.answer(r.last.text() or raw)
