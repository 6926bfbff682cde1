"""The time-query fast path: answer "what did we talk about yesterday?" from precomputed summaries.

Exactly one streamed LLM call when there are records; none when the range has no records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.events import Event, RunRoute
from agent_core.memory.time_query import TimeRange, is_detail_question
from agent_core.runtime.next_step import FinalAnswer, NextStep
from agent_core.runtime.replies import nothing_found
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.function import answer_step

RECALL_PROMPT = (
    "The user asks about earlier conversations. Answer only from the records that follow (summaries of past "
    "days, and sometimes exact messages). Be specific, name the days, and say so if the records do not cover "
    "something."
)
RECORDS_HEADER = "Records for {phrase} ({days}):\n{records}"


async def answer_from_history(r: AgentRun, span: TimeRange) -> AsyncIterator[Event | NextStep]:
    """The fast path for one detected range: the user's records of those days, then one answer call."""
    found = await r.guarded(r.recall(span, detail=is_detail_question(r.message)))
    yield RunRoute(mode="time_query", reason=f"history of {span.label('..')}")
    if found.empty:
        text = nothing_found(r.message, span)
        async for event in r.text_block(text):
            yield event
        yield FinalAnswer(text)
        return
    # Instructions first, the records in a system message of their own (as the window holds its summary).
    if span.latest:  # 上次 / "last time": the day found
        span = TimeRange(min(found.dates), max(found.dates), span.phrase)
    records = RECORDS_HEADER.format(phrase=span.phrase, days=span.label(), records=found.text())
    messages = [
        {"role": "system", "content": f"{r.agent.system_prompt}\n\n{RECALL_PROMPT}"},
        {"role": "system", "content": records},
        {"role": "user", "content": r.message},
    ]
    async for item in answer_step(r, messages):
        yield item
