"""The run's model steps and its own text: each upstream delta becomes events at once, under the run's guards.

A part of `live_run.LiveRun` (the `RunActions` a strategy uses to call the model); usage, the first token's
time and the answering model land in the recorder's outcome.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.events import (
    ActionArgs,
    ActionStart,
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    ToolArgs,
    ToolStart,
)
from agent_core.errors import AgentError
from agent_core.llm.base import LlmRequest
from agent_core.runtime.cancel import RunCancelled
from agent_core.runtime.recorder import RunRecorder
from agent_core.runtime.run_protocol import Purpose
from agent_core.runtime.scope import DeadlineReached, RunScope
from agent_core.runtime.step import StepAssembler, StreamedStep
from agent_core.runtime.toolset import Toolset
from agent_core.runtime.turn import PreparedTurn

_tool_events = (ToolStart, ToolArgs, ActionStart, ActionArgs)


class ModelCalls:
    """Model steps and text blocks, numbered in one sequence per run."""

    turn: PreparedTurn
    scope: RunScope
    recorder: RunRecorder
    toolset: Toolset
    _blocks: int

    def new_block_id(self) -> int:
        self._blocks += 1
        return self._blocks

    def model_step(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        forward_content: bool = True,
        purpose: Purpose = "chat",
        lead: str = "",
    ) -> StreamedStep:
        """One model call, each delta forwarded at once; the step tells what it produced once iterated.

        Tool calls are forwarded only from a call that offered tools: a call that offered none may still
        return some (providers do), and its caller decides what they mean (`step.tool_calls()`).
        """
        assembler = StepAssembler(step=self.new_block_id(), tool_type=self.toolset.kinds, lead=lead)
        request = LlmRequest(model=self.turn.run.model, messages=messages, tools=tools or [], purpose=purpose)
        hidden: tuple[type[Event], ...] = _tool_events if not tools else ()
        if not forward_content:
            hidden = (*hidden, ContentStart, ContentDelta, ContentEnd)
        return StreamedStep(assembler, self._stream(assembler, request, hidden, forward_content))

    async def _stream(
        self, assembler: StepAssembler, request: LlmRequest, hidden: tuple[type[Event], ...], forward_content: bool
    ) -> AsyncIterator[Event]:
        outcome = self.recorder.outcome
        stream = self.turn.deps.llm.stream(request)
        try:
            while True:
                try:
                    delta = await self.scope.next_item(stream)
                except StopAsyncIteration:
                    break
                if delta.model:
                    outcome.answered_by = delta.model
                if outcome.first_token_at is None and (delta.content or delta.reasoning or delta.tool_calls):
                    outcome.first_token_at = time.monotonic() - self.scope.started
                events = assembler.feed(delta)
                if hidden:
                    events = [e for e in events if not isinstance(e, hidden)]
                for event in events:
                    yield event
        except (DeadlineReached, RunCancelled):
            for event in assembler.finish():
                if forward_content or not isinstance(event, ContentEnd):
                    yield event
            outcome.usage = outcome.usage.add(assembler.usage)
            if forward_content and assembler.text():
                outcome.partial_text = assembler.text()
                outcome.final_text = assembler.text()
            raise
        except AgentError:
            if forward_content:
                outcome.partial_text = assembler.text()
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        outcome.usage = outcome.usage.add(assembler.usage)
        for event in assembler.finish():
            if forward_content or not isinstance(event, ContentEnd):
                yield event

    async def text_block(self, text: str) -> AsyncIterator[Event]:
        """Content produced by the run itself (filler lines, closing messages, ReAct answers)."""
        content_id = f"m_{self.new_block_id()}"
        yield ContentStart(content_id=content_id)
        yield ContentDelta(content_id=content_id, delta=text)
        yield ContentEnd(content_id=content_id)
