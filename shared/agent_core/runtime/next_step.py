"""What a strategy ends with: its next step, a small tagged union the run loop interprets.

A strategy (an async generator written against `run_protocol.AgentRun`) yields the run's events and, last,
one step. It never mutates the run to finish it:

- `FinalAnswer`: the run's answer, saved as the ASSISTANT message and returned to blocking callers.
- `WaitForClient`: the model called tools the caller runs itself; the run ends with finishReason
  `tool_calls` and the caller's outputs arrive with its next request.
- `RunAgain`: the same run continues with another strategy (Function -> Prompt fallback, the tool loop
  after quick-rule calls or after an answer call that returned calls anyway).
- `Draft`: an unpolished result for a caller that composes it further (chain's tool branch hands it to
  the enhancement call); it never reaches the run loop.

`Steps` drives a strategy: iterate it for its events (`RunAgain` followed inline), afterwards `.step`
says where it ended. The run loop and the strategies that wrap another one (chain, progressive) use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from agent_core.domain.events import Event, FinishReason
from agent_core.domain.models import ToolCall
from agent_core.runtime.run_protocol import AgentRun


@dataclass(frozen=True)
class FinalAnswer:
    """The answer. `preface`: answer parts already streamed and saved, which the answer follows."""

    text: str
    finish_reason: FinishReason = "stop"
    preface: str | None = None


@dataclass(frozen=True)
class WaitForClient:
    """Calls handed to the caller, saved with the ASSISTANT message (`stored` its content when not `text`)."""

    text: str
    calls: tuple[ToolCall, ...]
    stored: str | None = None
    preface: str | None = None


@dataclass(frozen=True)
class RunAgain:
    """Continue the same run with `then` (its events follow in the same stream)."""

    then: Strategy
    reason: str = ""


@dataclass(frozen=True)
class Draft:
    """A raw result (nothing of it streamed) for the enhancement call that rewrites it."""

    text: str
    finish_reason: FinishReason = "stop"


Ending = FinalAnswer | WaitForClient
NextStep = FinalAnswer | WaitForClient | RunAgain | Draft
Strategy = Callable[[AgentRun], AsyncIterator[Event | NextStep]]
STEP_TYPES = (FinalAnswer, WaitForClient, RunAgain, Draft)


class StrategyError(RuntimeError):
    """A strategy broke the contract: no step at its end, or events after it."""


class Steps:
    """A strategy driven to its end: iterate for its events; afterwards `step` is its final step."""

    def __init__(self, r: AgentRun, strategy: Strategy) -> None:
        self._r = r
        self._strategy = strategy
        self.step: FinalAnswer | WaitForClient | Draft | None = None

    async def __aiter__(self) -> AsyncIterator[Event]:
        strategy: Strategy | None = self._strategy
        while strategy is not None:
            ended: NextStep | None = None
            async for item in strategy(self._r):
                if ended is not None:
                    raise StrategyError(f"{getattr(strategy, '__name__', strategy)} went on after its step")
                if isinstance(item, STEP_TYPES):
                    ended = item
                else:
                    yield item
            if ended is None:
                raise StrategyError(f"{getattr(strategy, '__name__', strategy)} ended without a step")
            if isinstance(ended, RunAgain):
                strategy = ended.then
                continue
            self.step, strategy = ended, None

    def ending(self) -> Ending:
        """The step of a strategy that must answer (the run loop's): a draft here is a defect."""
        if not isinstance(self.step, FinalAnswer | WaitForClient):
            raise StrategyError(f"the strategy ended with {type(self.step).__name__}, not an answer")
        return self.step


def with_preface(step: FinalAnswer | WaitForClient | Draft | None, preface: str) -> NextStep:
    """The step of a follow-up loop whose answer follows parts already streamed and saved."""
    if isinstance(step, FinalAnswer):
        return FinalAnswer(step.text, step.finish_reason, preface)
    if isinstance(step, WaitForClient):
        return WaitForClient(step.text, step.calls, step.stored, preface)
    raise StrategyError(f"a follow-up loop ended with {type(step).__name__}, not an answer")
