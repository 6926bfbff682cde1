"""Routing, in one place: the history fast path, then quick rules, else the agent's strategy; chain routes by intent.

- Time query: a message asking about past conversations on named days (`memory/time_query.py`, in the
  user's zone, relative to the turn's "now").
- History fast path (one answer call over the precomputed summaries): only when the whole message is a
  question about past conversations and no other quick rule fires. A mixed message ("昨天聊了什么，今天
  北京天气怎样？") runs the history lookup (`search_chat_history`) as a quick call beside the others.
- Quick rules fire only on plain requests (`tools/quick_rules.py`), never for frontend tools or actions.
  After they ran, the answer call still offers the agent's tools (`strategies/quick.py`).
- `chain` agents skip both: the intent call is their routing (`strategies/chain.py`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.events import Event, RunRoute
from agent_core.domain.models import ToolCall
from agent_core.memory.time_query import TimeRange, detect, is_history_only
from agent_core.runtime.history_answer import answer_from_history
from agent_core.runtime.next_step import NextStep, Strategy
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.chain import chain_strategy
from agent_core.runtime.strategies.direct import direct_strategy
from agent_core.runtime.strategies.function import function_strategy
from agent_core.runtime.strategies.quick import call_tools_then_answer
from agent_core.runtime.strategies.react import react_strategy

STRATEGIES: dict[str, Strategy] = {
    "function": function_strategy,
    "react": react_strategy,
    "direct": direct_strategy,
    "chain": chain_strategy,
}
HISTORY_TOOL = "search_chat_history"


def time_query(r: AgentRun) -> TimeRange | None:
    """The past days the message asks about, in the turn's zone (None when it is not such a question)."""
    return detect(r.message, r.timezone, r.now)


def history_call(span: TimeRange) -> tuple[str, dict[str, Any]]:
    if span.latest:  # 上次 / "last time": the tool finds that day itself
        return HISTORY_TOOL, {"time_range": span.phrase}
    return HISTORY_TOOL, {"start": span.start.isoformat(), "end": span.end.isoformat()}


def self_made_calls(prefix: str, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolCall]:
    return [
        ToolCall(id=f"{prefix}_{n}", name=name, arguments=json.dumps(args, ensure_ascii=False))
        for n, (name, args) in enumerate(calls)
    ]


async def route_and_run(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    """The routing, as a strategy of its own: its events, then the step of the strategy it picked."""
    mode = r.agent.mode
    async for event in r.run_decided():  # approvals this request decided run before anything else
        yield event
    if mode == "chain" or r.continuation:  # tool results continue the strategy, not a new question
        async for item in STRATEGIES[mode](r):
            yield item
        return
    matches = r.toolset.quick_calls(r.message)
    span = time_query(r)
    if span is not None:
        if not matches and is_history_only(r.message):
            async for item in answer_from_history(r, span):
                yield item
            return
        if HISTORY_TOOL in r.toolset.names:
            matches = [history_call(span), *matches]
    calls = [call for call in self_made_calls("quick", matches) if not r.hands_over(call)]
    if calls:  # (an approval handed over to the caller is left to the model: its call ends the run)
        yield RunRoute(mode=mode, matched_tools=[c.name for c in calls], reason="quick rule matched")
        async for item in call_tools_then_answer(r, calls):
            yield item
        return
    async for item in STRATEGIES[mode](r):
        yield item
