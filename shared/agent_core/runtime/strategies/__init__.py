"""Orchestration strategies: function calling, ReAct, direct answer, chain (intent -> branch -> enhance)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.runtime.strategies.chain import chain_strategy
from agent_core.runtime.strategies.direct import direct_strategy
from agent_core.runtime.strategies.function import function_strategy
from agent_core.runtime.strategies.react import react_strategy

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

Strategy = Callable[["TurnRunner"], AsyncIterator[Event]]

STRATEGIES: dict[str, Strategy] = {
    "function": function_strategy,
    "react": react_strategy,
    "direct": direct_strategy,
    "chain": chain_strategy,
}
