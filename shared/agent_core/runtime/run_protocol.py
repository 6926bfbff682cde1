"""What a strategy sees of a run: the narrow interface strategies, the router, the composer and the history
answer use.

`live_run.LiveRun` implements it over the run's scope (deadline, cancellation, lease) and recorder (stamping,
the replay snapshot, persistence), which stay behind it. A strategy reads and acts through it and ends by
yielding its next step (`next_step.py`); it never finishes the run by mutating it. This module imports nothing
of the run machinery, so strategies depend on it and never on the runner: the runtime's import graph has no
cycle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from agent_core.domain.events import Event
from agent_core.domain.models import ToolCall
from agent_core.memory.history_records import Recall
from agent_core.memory.time_query import TimeRange
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.toolset import Toolset
from agent_core.tools.service import ToolExecution

T = TypeVar("T")
Purpose = Literal["chat", "intent", "react", "enhance"]
OnResult = Callable[[ToolExecution], AsyncIterator[Event]]


class ModelStep(Protocol):
    """One streamed model call: iterate it for its events; afterwards it tells what the model produced."""

    def __aiter__(self) -> AsyncIterator[Event]: ...

    def text(self) -> str:
        """The content the model wrote."""
        ...

    def tool_calls(self) -> list[ToolCall]:
        """Every call the model made, in index order (also from a call that offered no tools)."""
        ...

    def end_calls(self) -> list[tuple[ToolCall, Event]]:
        """Each call not yet ended, with its end event (the caller may act before sending each)."""
        ...


class RunView(Protocol):
    """What the run is about: its question, agent and tools, the user's zone and records, its guards."""

    @property
    def message(self) -> str:
        """The user's message (for a continuation, the last USER message of the history)."""
        ...

    @property
    def agent(self) -> AgentDefinition: ...

    @property
    def toolset(self) -> Toolset: ...

    @property
    def client_tools(self) -> frozenset[str]:
        """Tools the caller runs itself: a model step calling one ends the run (finishReason `tool_calls`)."""
        ...

    @property
    def continuation(self) -> bool:
        """The request brings the outputs of client tools: it continues the run, it asks no new question."""
        ...

    @property
    def timezone(self) -> str:
        """The user's zone for this turn (an IANA name)."""
        ...

    @property
    def now(self) -> datetime:
        """The turn's "now" (its start; X-Agent-Now may set it), in UTC."""
        ...

    def window(self, system_prompt: str | None = None, *, include_run: bool = True) -> list[dict[str, Any]]:
        """The prompt window plus (unless told otherwise) what this run has added so far."""
        ...

    def recall(self, span: TimeRange, *, detail: bool) -> Awaitable[Recall]:
        """The user's records of the days in `span`, in the user's zone (the history fast path)."""
        ...

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        """Await one thing under the run's deadline and cancellation."""
        ...

    def check_cancelled(self) -> None:
        """Raise if the run was cancelled (checked between steps)."""
        ...


class RunActions(Protocol):
    """What a strategy does in the run: model steps, its own text, tool calls (every event streams and is kept)."""

    def model_step(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        forward_content: bool = True,
        purpose: Purpose = "chat",
        lead: str = "",
    ) -> ModelStep:
        """One model call, each delta forwarded at once; tool calls are forwarded only if `tools` were offered."""
        ...

    def text_block(self, text: str) -> AsyncIterator[Event]:
        """Content produced by the run itself (filler lines, closing messages, ReAct answers)."""
        ...

    def announce(self, calls: list[ToolCall]) -> AsyncIterator[Event]:
        """Start and args events for calls the run makes itself (quick rules, ReAct)."""
        ...

    def end_event(self, call: ToolCall) -> Event:
        """The end event of a call the run makes itself."""
        ...

    def end_calls(self, ends: list[tuple[ToolCall, Event]], *, handed: bool = False) -> AsyncIterator[Event]:
        """Each call's end event; a frontend call's wait is opened before its end is sent; a call that needs
        approval asks for it (with `hand_over` approvals, only when `handed` to the caller)."""
        ...

    def run_calls(
        self, calls: list[ToolCall], *, content: str = "", on_result: OnResult | None = None
    ) -> AsyncIterator[Event]:
        """Execute calls in parallel (events in completion order); the call and result messages are saved."""
        ...

    def hands_over(self, call: ToolCall) -> bool:
        """Whether the call ends the run for the caller: a client tool, or an approval the caller decides later."""
        ...

    def run_decided(self) -> AsyncIterator[Event]:
        """The calls the request decided (approvals handed over before) run first; nothing for other requests."""
        ...

    def result_of(self, call_id: str) -> str:
        """The saved result of a call this run executed ('' if it has none)."""
        ...

    def calls_made(self) -> list[ToolCall]:
        """The calls this run made so far (a run continued from its checkpoint goes on after them)."""
        ...


class AgentRun(RunView, RunActions, Protocol):
    """The run a strategy drives: what it is about (`RunView`) and what it does (`RunActions`)."""
