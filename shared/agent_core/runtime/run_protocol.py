"""What a strategy sees of a run: the narrow interface strategies, the composer and the history answer use.

`loop.TurnRunner` implements it (stamping, the replay snapshot, the deadline and cancellation, the lease,
persistence stay behind it). This module imports nothing of the run machinery, so strategies depend on it
and never on the runner: the runtime's import graph has no cycle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar

from agent_core.domain.events import Event, FinishReason
from agent_core.domain.models import ToolCall
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


class AgentRun(Protocol):
    """The run a strategy drives: its question, agent and tools, model steps, tool calls, and its answer."""

    @property
    def message(self) -> str:
        """The user's message."""
        ...

    @property
    def agent(self) -> AgentDefinition: ...

    @property
    def toolset(self) -> Toolset: ...

    @property
    def client_tools(self) -> frozenset[str]:
        """Tools the caller runs itself: a model step calling one ends the run (finishReason `tool_calls`)."""
        ...

    def window(self, system_prompt: str | None = None, *, include_run: bool = True) -> list[dict[str, Any]]:
        """The prompt window plus (unless told otherwise) what this run has added so far."""
        ...

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

    def end_calls(self, ends: list[tuple[ToolCall, Event]]) -> AsyncIterator[Event]:
        """Each call's end event; a frontend call's wait is opened before its end is sent."""
        ...

    def run_calls(
        self, calls: list[ToolCall], *, content: str = "", on_result: OnResult | None = None
    ) -> AsyncIterator[Event]:
        """Execute calls in parallel (events in completion order); the call and result messages are saved."""
        ...

    def result_of(self, call_id: str) -> str:
        """The saved result of a call this run executed ('' if it has none)."""
        ...

    def answer(
        self,
        text: str,
        finish_reason: FinishReason = "stop",
        *,
        calls: list[ToolCall] | None = None,
        stored: str | None = None,
    ) -> None:
        """Finish the run with its answer, saved as the ASSISTANT message and returned to blocking callers.

        `calls`: tool calls handed to the caller, saved with the message. `stored`: the message's content
        when it is not the whole answer (text already saved with earlier calls).
        """
        ...

    def begin_answer(self, text: str) -> None:
        """The answer starts with `text`, already streamed and saved (answer parts before a follow-up loop).

        What `answer` then gets follows it after a paragraph break (unless it starts with whitespace).
        """
        ...

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        """Await one thing under the run's deadline and cancellation."""
        ...

    def check_cancelled(self) -> None:
        """Raise if the run was cancelled (checked between steps)."""
        ...
