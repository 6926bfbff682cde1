"""Answers built from tool results: one answer call, progressive parts as tools finish, and enhancement."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agent_core.domain.events import Event, RunWarning
from agent_core.domain.models import ToolCall
from agent_core.tools.service import ToolExecution

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

_CJK = re.compile(r"[\u3400-\u9fff]")
RAW_RESULT = "Raw result:\n"
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


def unoffered_message(r: TurnRunner, names: list[str]) -> str:
    listed = ", ".join(names)
    if _chinese(r.message):
        return f"（模型想调用此处不可用的工具：{listed}。）"
    return f"(The model asked for tools that are not available here: {listed}.)"


async def settle_answer(r: TurnRunner, *, loop: bool = True, raw: bool = False) -> AsyncIterator[Event]:
    """The answer of a call that offered no tools; tool calls it returned anyway are handled, never dangling.

    Their events were not forwarded. A `run.warning` names them; when the model wrote no text and the
    agent has tools, the run continues in the tool loop (tools offered) so the calls go through the
    normal path; otherwise the text (or a short note naming the tools) is the answer.
    """
    assert r.last is not None
    step = r.last
    text = step.text()
    names = list(dict.fromkeys(call.name for call in step.tool_calls()))
    if names:
        message = f"the model called {', '.join(names)} in a call that offered no tools"
        yield RunWarning(code="unoffered_tool_calls", message=message)
        if loop and not text and r.toolset.schemas():
            from agent_core.runtime.strategies.function import function_loop

            async for event in function_loop(r, raw=raw):
                yield event
            return
    if raw:
        r.raw_result = text
        return
    if not text and names:
        text = unoffered_message(r, names)
        async for event in r.text_block(text):
            yield event
    r.answer(text)


async def answer_step(r: TurnRunner, messages: list[dict[str, Any]]) -> AsyncIterator[Event]:
    """One streamed answer call offering no tools (direct answers, recall)."""
    async for event in r.model_step(messages):
        yield event
    async for event in settle_answer(r):
        yield event


async def call_tools_then_answer(r: TurnRunner, calls: list[ToolCall], *, content: str = "") -> AsyncIterator[Event]:
    """Calls the run decided itself (quick rules): announce, end, execute in parallel, then answer.

    The answer call still offers the agent's tools, so the model can complete what the rules missed:
    a `react` agent continues its ReAct loop with the results as observations, any other agent the
    function loop.
    """
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
    from agent_core.runtime.strategies.function import function_loop
    from agent_core.runtime.strategies.react import react_loop

    loop = react_loop(r, seed=calls) if r.agent.mode == "react" else function_loop(r)
    async for event in loop:
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


def separator(previous: str) -> str:
    """What goes between two answer parts so they read as prose: a paragraph break unless one is there."""
    return "" if not previous or previous[-1].isspace() else "\n\n"


async def progressive(r: TurnRunner, calls: list[ToolCall], *, content: str = "") -> AsyncIterator[Event]:
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
        messages = _part_messages(r, execution, first=len(parts) == 1)
        async for event in r.model_step(messages, tools=tools, lead=separator(parts[-1])):
            yield event
        assert r.last is not None
        if r.last.text().strip():
            parts.append(r.last.text())
        if tools:
            follow_up.extend(r.last.end_calls())
        elif r.last.tool_calls():
            message = "an answer part called tools in a call that offered none"
            yield RunWarning(code="unoffered_tool_calls", message=message)

    async for event in r.run_calls(calls, content=content, on_result=on_result):
        yield event
    text = "".join(parts).rstrip()
    if not follow_up:
        r.answer(text)
        return
    from agent_core.runtime.strategies.function import function_loop

    async for event in r.end_calls(follow_up):
        yield event
    async for event in r.run_calls([call for call, _ in follow_up], content=text):
        yield event
    async for event in function_loop(r, lead=separator(text), compose=False):
        yield event
    r.outcome.final_text = f"{text}{separator(text)}{r.outcome.final_text or ''}".rstrip()


async def enhance(r: TurnRunner, raw: str) -> AsyncIterator[Event]:
    """One more streamed call that turns a raw result into the user-facing Markdown answer."""
    messages = [
        {"role": "system", "content": ENHANCE_PROMPT},
        {"role": "user", "content": f"Question:\n{r.message}\n\n{RAW_RESULT}{raw}"},
    ]
    async for event in r.model_step(messages, purpose="enhance"):
        yield event
    assert r.last is not None
    text = r.last.text()
    if not text:  # nothing came back as text (e.g. an unoffered tool call): the raw result is the answer
        async for event in r.text_block(raw):
            yield event
    r.answer(text or raw)
