"""The time-query fast path: answer "what did we talk about yesterday?" from precomputed summaries.

Exactly one streamed LLM call when there are records; none when the range has no records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.memory.calendar import zone
from agent_core.memory.recall import recall
from agent_core.memory.time_query import TimeRange, is_detail_question
from agent_core.runtime.composer import answer_step

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

RECALL_PROMPT = (
    "The user asks about earlier conversations. Answer only from the records that follow (summaries of past "
    "days, and sometimes exact messages). Be specific, name the days, and say so if the records do not cover "
    "something."
)
RECORDS_HEADER = "Records for {phrase} ({days}):\n{records}"


def nothing_found(r: TurnRunner, span: TimeRange) -> str:
    if any("\u3400" <= ch <= "\u9fff" for ch in r.message):
        return f"我没有找到{span.phrase}（{span.label('至')}）的聊天记录。"
    return f"I found no conversations from {span.phrase} ({span.label()})."


def time_query_path(span: TimeRange):  # type: ignore[no-untyped-def]
    """The fast path for one detected range."""

    async def run(r: TurnRunner) -> AsyncIterator[Event]:
        tz = zone(r.turn.timezone, r.deps.settings.default_timezone)
        found = await r.guarded(recall(r.deps.store, r.run.user_id, span, tz, detail=is_detail_question(r.message)))
        yield r.route("time_query", f"history of {span.label('..')}")
        if found.empty:
            text = nothing_found(r, span)
            async for event in r.text_block(text):
                yield event
            r.answer(text)
            return
        # Instructions first, the records in a system message of their own (as the window holds its summary).
        records = RECORDS_HEADER.format(phrase=span.phrase, days=span.label(), records=found.text())
        messages = [
            {"role": "system", "content": f"{r.agent.system_prompt}\n\n{RECALL_PROMPT}"},
            {"role": "system", "content": records},
            {"role": "user", "content": r.message},
        ]
        async for event in answer_step(r, messages):
            yield event

    return run
