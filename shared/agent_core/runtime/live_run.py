"""`LiveRun`: the `AgentRun` a strategy drives, over the run's scope (guards) and recorder (what it produced).

Its model steps and tool calls are `model_calls.ModelCalls` and `tool_calls.ToolCalls`; this part answers
what the run is about: the question, the agent and its tools, the user's zone and records, the prompt window.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any, TypeVar

from agent_core.guardrails.guard import Guard
from agent_core.memory.calendar import from_ms, zone
from agent_core.memory.history_records import Recall, recall
from agent_core.memory.time_query import TimeRange
from agent_core.memory.window import build_window, to_chat_message
from agent_core.runtime.approvals import RunWaits
from agent_core.runtime.checkpoint import StepCheckpoints
from agent_core.runtime.model_calls import ModelCalls
from agent_core.runtime.recorder import RunRecorder
from agent_core.runtime.scope import RunScope
from agent_core.runtime.tool_calls import ToolCalls
from agent_core.runtime.toolset import Toolset
from agent_core.runtime.turn import PreparedTurn

T = TypeVar("T")


class LiveRun(ModelCalls, ToolCalls):
    """One run as its strategy sees it (implements `run_protocol.AgentRun`)."""

    def __init__(self, turn: PreparedTurn, scope: RunScope, recorder: RunRecorder, toolset: Toolset) -> None:
        run = turn.run
        self.turn, self.scope, self.recorder, self.toolset = turn, scope, recorder, toolset
        self.agent = turn.agent
        self.bridge = RunWaits(turn.deps.waits, run.run_id, run.user_id)
        self.checkpoints = StepCheckpoints(turn, recorder, self.bridge)
        self._blocks = 0
        self.guard: Guard | None = None  # the agent's guardrails (tool checks); set by the runner

    @property
    def message(self) -> str:
        return self.turn.question

    @property
    def client_tools(self) -> frozenset[str]:
        return self.turn.request.client_tools

    @property
    def continuation(self) -> bool:
        return self.turn.request.continuation

    @property
    def timezone(self) -> str:
        return self.turn.timezone

    @property
    def now(self) -> datetime:
        return from_ms(self.turn.at_ms)

    def window(self, system_prompt: str | None = None, *, include_run: bool = True) -> list[dict[str, Any]]:
        """The prompt window plus (unless told otherwise) what this run has added so far."""
        turn, s = self.turn, self.turn.deps.settings
        added = self.recorder.outcome.messages if include_run else []
        # Results of calls this request decided answer calls in the history: they join it (its unit is whole)
        decided = {d.call.id for d in turn.request.decided}
        answers = [m for m in added if m.tool_call_id in decided]
        window = build_window(
            system_prompt or self.agent.system_prompt,
            turn.summary,
            [*turn.history.items, *answers],
            max_tokens=s.memory_max_prompt_tokens,
            tool_output_chars=s.tool_output_window_chars,
            extra_system=turn.extra_system,
        )
        rest = [m for m in added if m.tool_call_id not in decided]
        return window.messages + [to_chat_message(m, s.tool_output_window_chars) for m in rest]

    def recall(self, span: TimeRange, *, detail: bool) -> Awaitable[Recall]:
        turn = self.turn
        tz = zone(turn.timezone, turn.deps.settings.default_timezone)
        return recall(turn.deps.memory_store, turn.run.user_id, span, tz, detail=detail)

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        return await self.scope.guarded(awaitable)

    def check_cancelled(self) -> None:
        self.scope.check_cancelled()
