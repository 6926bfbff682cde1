"""Routing: the history fast path, then quick rules, else the agent's strategy; chain routes by intent.

- History fast path (one answer call over the precomputed summaries): only when the whole message is a
  question about past conversations and no other quick rule fires. A mixed message ("昨天聊了什么，今天
  北京天气怎样？") runs the history lookup (`search_chat_history`) as a quick call beside the others.
- Quick rules fire only on plain requests (`tools/quick_rules.py`), never for frontend tools or actions.
  After they ran, the answer call still offers the agent's tools (`composer.call_tools_then_answer`).
- `chain` agents skip both: the intent call is their routing (`strategies/chain.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agent_core.domain.events import Event
from agent_core.memory.time_query import TimeRange, is_history_only
from agent_core.runtime.composer import call_tools_then_answer
from agent_core.runtime.strategies import STRATEGIES

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

HISTORY_TOOL = "search_chat_history"


def history_call(span: TimeRange) -> tuple[str, dict[str, Any]]:
    return HISTORY_TOOL, {"start": span.start.isoformat(), "end": span.end.isoformat()}


async def route_and_run(r: TurnRunner) -> AsyncIterator[Event]:
    mode = r.agent.mode
    for warning in r.warnings:
        yield warning
    if mode == "chain":
        async for event in STRATEGIES[mode](r):
            yield event
        return
    matches = r.toolset.quick_calls(r.message)
    span = r.turn.time_query
    if span is not None:
        fast = r.turn.fast_path
        if fast is not None and not matches and is_history_only(r.message):
            async for event in fast(r):
                yield event
            return
        if HISTORY_TOOL in r.toolset.names:
            matches = [history_call(span), *matches]
    if matches:
        calls = r.self_made_calls("quick", matches)
        yield r.route(mode, "quick rule matched", [c.name for c in calls])
        async for event in call_tools_then_answer(r, calls):
            yield event
        return
    async for event in STRATEGIES[mode](r):
        yield event
