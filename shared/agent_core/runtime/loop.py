"""The function-calling loop: stream, forward every delta, execute tools in parallel, persist."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from aws_lambda_powertools.metrics import MetricUnit

from agent_core.domain.events import (
    ChatStart,
    Event,
    RequestQuery,
    RunComplete,
    RunError,
    RunRoute,
    RunStart,
    ToolResult,
)
from agent_core.domain.ids import now_ms, sortable_id
from agent_core.domain.models import Message, Role, RunStatus, ToolCallRecord, TurnResult, Usage
from agent_core.errors import AgentError
from agent_core.llm.base import LlmRequest
from agent_core.memory.window import build_window, to_chat_message
from agent_core.observability import logger, metrics
from agent_core.runtime.executor import execute_parallel
from agent_core.runtime.step import StepAssembler
from agent_core.runtime.turn import PreparedTurn
from agent_core.tools.base import ToolContext

T = TypeVar("T")


class DeadlineReached(Exception):
    """The turn deadline passed: the turn ends cleanly with finishReason `deadline`."""


class _Clock:
    def __init__(self, deadline_ms: int | None) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + deadline_ms / 1000 if deadline_ms else None

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


async def _next(iterator: AsyncIterator[T], clock: _Clock) -> T:
    remaining = clock.remaining()
    if remaining is None:
        return await anext(iterator)
    if remaining <= 0:
        raise DeadlineReached
    try:
        return await asyncio.wait_for(anext(iterator), remaining)
    except TimeoutError as exc:
        raise DeadlineReached from exc


class TurnRunner:
    """Drives one prepared turn and yields its events; `result` is set when it ends."""

    def __init__(self, turn: PreparedTurn) -> None:
        self.turn = turn
        self.deps = turn.deps
        self.run = turn.run
        self.messages: list[Message] = []
        self.records: list[ToolCallRecord] = []
        self.usage = Usage()
        self.final_text = ""
        self.first_token_at: float | None = None
        self._finish_reason = "stop"
        self.clock = _Clock(turn.request.deadline_ms)

    def _tool_context(self) -> ToolContext:
        return ToolContext(
            request_id=self.run.request_id,
            conversation_id=self.run.chat_id,
            user_id=self.run.user_id,
            settings=self.deps.settings,
            timezone=self.deps.settings.default_timezone,
            now=self.turn.now,
        )

    def _window(self) -> list[dict[str, Any]]:
        s = self.deps.settings
        window = build_window(
            self.turn.agent.system_prompt,
            self.turn.summary,
            self.turn.history.items,
            max_tokens=s.memory_max_prompt_tokens,
            tool_output_chars=s.tool_output_window_chars,
        )
        return window.messages + [to_chat_message(m, s.tool_output_window_chars) for m in self.messages]

    def _save(self, role: Role, **fields: Any) -> Message:
        message = Message(
            id=sortable_id(),
            chat_id=self.run.chat_id,
            role=role,
            run_id=self.run.run_id,
            request_id=self.run.request_id,
            created_at=now_ms(),
            **fields,
        )
        self.messages.append(message)
        return message

    async def events(self) -> AsyncIterator[Event]:
        turn, run = self.turn, self.run
        yield RequestQuery(message=turn.request.message, agent_key=turn.agent.key)
        if turn.created_chat:
            yield ChatStart(chat_name=turn.chat.title)
        yield RunStart(agent_key=turn.agent.key, model=run.model)
        yield RunRoute(mode=turn.agent.mode, reason="function calling")
        try:
            async for event in self._steps():
                yield event
            finish = self._finish_reason
        except DeadlineReached:
            finish = "deadline"
        except AgentError as error:
            await self._end(RunStatus.FAILED, error.code, error.message)
            yield RunError(code=error.code, message=error.message)
            return
        except Exception as exc:
            logger.exception("run failed", extra={"runId": run.run_id})
            await self._end(RunStatus.FAILED, "internal_error", type(exc).__name__)
            yield RunError(code="internal_error", message="the run failed unexpectedly")
            return
        await self._end(RunStatus.COMPLETED, finish_reason=finish)
        yield RunComplete.of(finish, self.usage)

    async def _steps(self) -> AsyncIterator[Event]:
        agent, run = self.turn.agent, self.run
        tool_names = agent.tools
        registry = self.deps.tools.registry
        declared = registry.schemas(tool_names)
        kinds: dict[str, str] = {n: t.kind for n in tool_names if (t := registry.get(n)) is not None}
        for step in range(1, agent.max_steps + 1):
            assembler = StepAssembler(step=step, tool_type=kinds)
            request = LlmRequest(model=run.model, messages=self._window(), tools=declared)
            stream = self.deps.llm.stream(request).__aiter__()
            try:
                while True:
                    try:
                        delta = await _next(stream, self.clock)
                    except StopAsyncIteration:
                        break
                    if self.first_token_at is None and (delta.content or delta.reasoning or delta.tool_calls):
                        self.first_token_at = time.monotonic()
                    for event in assembler.feed(delta):
                        yield event
            except DeadlineReached:
                for event in assembler.finish():
                    yield event
                self.usage = self.usage.add(assembler.usage)
                if assembler.text():
                    self.final_text = assembler.text()
                    self._save(Role.ASSISTANT, content=self.final_text)
                raise
            self.usage = self.usage.add(assembler.usage)
            for event in assembler.finish():
                yield event
            calls = assembler.tool_calls()
            if not calls:
                self.final_text = assembler.text()
                self._save(Role.ASSISTANT, content=self.final_text)
                self._finish_reason = "stop"
                return
            self._save(Role.ASSISTANT, content=assembler.text(), tool_calls=calls)
            async for event in self._run_tools(calls):
                yield event
        self._finish_reason = "max_steps"

    async def _run_tools(self, calls: list[Any]) -> AsyncIterator[Event]:
        done: dict[str, Message] = {}
        executions = execute_parallel(self.deps.tools, calls, self._tool_context())
        try:
            while True:
                try:
                    execution = await _next(executions, self.clock)
                except StopAsyncIteration:
                    break
                call = execution.call
                done[call.id] = Message(
                    id="",
                    chat_id=self.run.chat_id,
                    role=Role.TOOL,
                    content=execution.model_content(),
                    tool_call_id=call.id,
                    tool_name=call.name,
                    created_at=0,
                )
                self.records.append(
                    ToolCallRecord(
                        id=call.id,
                        tool_name=call.name,
                        status=execution.status,
                        reason=execution.reason,
                        duration_ms=execution.duration_ms,
                    )
                )
                yield ToolResult(
                    tool_id=call.id,
                    result=execution.result_payload(),
                    status=execution.status.value,
                    reason=execution.reason or None,
                )
        finally:
            await executions.aclose()
            # Results are stored in call order so the window pairs them with their call.
            for call in calls:
                if call.id in done:
                    m = done[call.id]
                    self._save(Role.TOOL, content=m.content, tool_call_id=m.tool_call_id, tool_name=m.tool_name)

    async def _end(
        self,
        status: RunStatus,
        error_code: str | None = None,
        error_message: str | None = None,
        finish_reason: str = "stop",
    ) -> None:
        run = self.run
        run.status = status
        run.usage = self.usage
        run.ended_at = now_ms()
        run.error_code, run.error_message = error_code, error_message
        if self.first_token_at is not None:
            run.first_token_ms = int((self.first_token_at - self.clock.started) * 1000)
        if status == RunStatus.COMPLETED:
            run.result = TurnResult(
                request_id=run.request_id,
                assistant_message=self.final_text,
                tool_calls=self.records,
                finish_reason=finish_reason,
            )
            self.turn.result = run.result
        else:
            # No half-written assistant message: keep only complete tool-call/result pairs.
            self.messages = [m for m in self.messages if m.role != Role.ASSISTANT or m.tool_calls]
        await self.deps.store.finish_turn(run, self.messages, run.ended_at)
        self._emit_metrics()

    def _emit_metrics(self) -> None:
        run = self.run
        if run.first_token_ms is not None:
            metrics.add_metric(name="TimeToFirstToken", unit=MetricUnit.Milliseconds, value=run.first_token_ms)
        metrics.add_metric(name="PromptTokens", unit=MetricUnit.Count, value=run.usage.prompt_tokens)
        metrics.add_metric(name="CompletionTokens", unit=MetricUnit.Count, value=run.usage.completion_tokens)
