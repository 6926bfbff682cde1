"""The function-calling loop: stream, forward every delta, execute tools in parallel, persist."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from agent_core.domain.events import (
    ActionResult,
    ChatStart,
    Event,
    RequestQuery,
    RequestSubmit,
    RunCancel,
    RunComplete,
    RunError,
    RunRoute,
    RunStart,
    ToolResult,
)
from agent_core.domain.ids import now_ms, sortable_id
from agent_core.domain.models import Message, Role, RunStatus, ToolCall, ToolCallRecord, ToolStatus
from agent_core.errors import AgentError
from agent_core.llm.base import LlmRequest
from agent_core.memory.window import build_window, to_chat_message
from agent_core.observability import logger
from agent_core.protocol.envelope import Envelope, EventAssembler
from agent_core.protocol.replay import SnapshotBuilder
from agent_core.runtime.cancel import CancelWatch, RunCancelled
from agent_core.runtime.executor import execute_parallel
from agent_core.runtime.finish import RunOutcome, persist_run
from agent_core.runtime.frontend import StoreFrontendBridge
from agent_core.runtime.step import StepAssembler
from agent_core.runtime.turn import PreparedTurn
from agent_core.tools.base import ToolContext
from agent_core.tools.service import ToolExecution

T = TypeVar("T")
DISCONNECTED = "client_disconnected"


class DeadlineReached(Exception):
    """The turn deadline passed: the turn ends cleanly with finishReason `deadline`."""


class TurnRunner:
    """Drives one prepared turn and yields its stamped events; `turn.result` is set when it completes."""

    def __init__(self, turn: PreparedTurn) -> None:
        self.turn = turn
        self.deps = turn.deps
        self.run = turn.run
        self.outcome = RunOutcome()
        self.assembler = EventAssembler(self.run.run_id, self.run.chat_id, self.run.request_id)
        self.snapshot = SnapshotBuilder()
        self.started = time.monotonic()
        deadline_ms = turn.request.deadline_ms
        self.deadline = self.started + deadline_ms / 1000 if deadline_ms else None
        local = self.deps.cancels.register(self.run.run_id)
        self.cancel = CancelWatch(self.deps.store, self.run.chat_id, self.run.run_id, local)
        self.bridge = StoreFrontendBridge(self.deps.store, self.run.run_id, self.run.user_id)
        self._finish_reason = "stop"
        self._ended = False

    # ----- events -----

    def _emit(self, event: Event) -> list[Envelope]:
        envelopes = self.assembler.process(event)
        for envelope in envelopes:
            self.snapshot.feed(envelope)
        return envelopes

    async def events(self) -> AsyncIterator[Envelope]:
        turn, run = self.turn, self.run
        self.cancel.start()
        try:
            preamble: list[Event] = [RequestQuery(message=turn.request.message, agent_key=turn.agent.key)]
            if turn.created_chat:
                preamble.append(ChatStart(chat_name=turn.chat.title))
            preamble += [
                RunStart(agent_key=turn.agent.key, model=run.model),
                RunRoute(mode=turn.agent.mode, reason="function calling"),
            ]
            for event in preamble:
                for envelope in self._emit(event):
                    yield envelope
            terminal: Event
            try:
                async for event in self._steps():
                    for envelope in self._emit(event):
                        yield envelope
                terminal, status = RunComplete.of(self._finish_reason, self.outcome.usage), RunStatus.COMPLETED
            except DeadlineReached:
                self._finish_reason = "deadline"
                terminal, status = RunComplete.of("deadline", self.outcome.usage), RunStatus.COMPLETED
            except RunCancelled as cancelled:
                terminal, status = RunCancel(reason=cancelled.reason), RunStatus.CANCELLED
            except AgentError as error:
                terminal, status = RunError(code=error.code, message=error.message), RunStatus.FAILED
            except Exception as exc:
                logger.exception("run failed", extra={"runId": run.run_id})
                terminal = RunError(
                    code="internal_error", message=f"the run failed unexpectedly ({type(exc).__name__})"
                )
                status = RunStatus.FAILED
            envelopes = self._emit(terminal)
            await self._end(status, terminal)
            for envelope in envelopes:
                yield envelope
        except (GeneratorExit, asyncio.CancelledError):
            # The client went away (visible locally): the run stops and keeps what it had.
            if not self._ended:
                terminal = RunCancel(reason=DISCONNECTED)
                self._emit(terminal)
                await asyncio.shield(self._end(RunStatus.CANCELLED, terminal))
            raise
        finally:
            await self.cancel.stop()
            self.deps.cancels.unregister(run.run_id)

    async def _end(self, status: RunStatus, terminal: Event) -> None:
        self._ended = True
        await persist_run(self.turn, self.outcome, status, terminal, self._finish_reason, self.snapshot.entries())

    # ----- waiting with deadline and cancellation -----

    async def _next(self, iterator: AsyncIterator[T]) -> T:
        """The next item, unless the run is cancelled or the deadline passes first."""
        self.cancel.raise_if_cancelled()
        remaining = None if self.deadline is None else self.deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise DeadlineReached
        item = asyncio.ensure_future(anext(iterator))
        stop = asyncio.ensure_future(self.cancel.event.wait())
        try:
            done, _ = await asyncio.wait({item, stop}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if item in done:
            return item.result()
        item.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
            await item
        if self.cancel.event.is_set():
            raise RunCancelled(self.cancel.reason)
        raise DeadlineReached

    # ----- steps -----

    def _tool_context(self) -> ToolContext:
        return ToolContext(
            request_id=self.run.request_id,
            conversation_id=self.run.chat_id,
            user_id=self.run.user_id,
            settings=self.deps.settings,
            timezone=self.deps.settings.default_timezone,
            now=self.turn.now,
            run_id=self.run.run_id,
            blobs=self.deps.blobs,
            frontend=self.bridge,
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
        return window.messages + [to_chat_message(m, s.tool_output_window_chars) for m in self.outcome.messages]

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
        self.outcome.messages.append(message)
        return message

    async def _steps(self) -> AsyncIterator[Event]:
        agent, run = self.turn.agent, self.run
        registry = self.deps.tools.registry
        declared = registry.schemas(agent.tools)
        kinds: dict[str, str] = {n: t.kind for n in agent.tools if (t := registry.get(n)) is not None}
        for step in range(1, agent.max_steps + 1):
            self.cancel.raise_if_cancelled()
            assembler = StepAssembler(step=step, tool_type=kinds)
            request = LlmRequest(model=run.model, messages=self._window(), tools=declared)
            stream = self.deps.llm.stream(request)
            try:
                while True:
                    try:
                        delta = await self._next(stream)
                    except StopAsyncIteration:
                        break
                    if self.outcome.first_token_at is None and (delta.content or delta.reasoning or delta.tool_calls):
                        self.outcome.first_token_at = time.monotonic() - self.started
                    for event in assembler.feed(delta):
                        yield event
            except (DeadlineReached, RunCancelled):
                for event in assembler.finish():
                    yield event
                self.outcome.usage = self.outcome.usage.add(assembler.usage)
                self.outcome.partial_text = assembler.text()
                if assembler.text():
                    self.outcome.final_text = assembler.text()
                raise
            except AgentError:
                self.outcome.partial_text = assembler.text()
                raise
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            self.outcome.usage = self.outcome.usage.add(assembler.usage)
            for event in assembler.finish():
                yield event
            ends = assembler.end_calls()
            if not ends:
                self.outcome.final_text = assembler.text()
                self._save(Role.ASSISTANT, content=self.outcome.final_text)
                self._finish_reason = "stop"
                return
            calls = [call for call, _ in ends]
            for call, end in ends:
                if kinds.get(call.name) == "frontend":
                    await self.bridge.open_wait(call.id, self.deps.settings.frontend_submit_timeout_ms)
                yield end
            self._save(Role.ASSISTANT, content=assembler.text(), tool_calls=calls)
            async for event in self._run_tools(calls, kinds):
                yield event
        self._finish_reason = "max_steps"

    async def _run_tools(self, calls: list[ToolCall], kinds: dict[str, str]) -> AsyncIterator[Event]:
        done: dict[str, ToolExecution] = {}
        executions = execute_parallel(self.deps.tools, calls, self._tool_context())
        try:
            while True:
                try:
                    execution = await self._next(executions)
                except StopAsyncIteration:
                    break
                call = execution.call
                done[call.id] = execution
                self.outcome.records.append(
                    ToolCallRecord(
                        id=call.id,
                        tool_name=call.name,
                        status=execution.status,
                        reason=execution.reason,
                        duration_ms=execution.duration_ms,
                    )
                )
                kind = kinds.get(call.name, "backend")
                if kind == "action":
                    yield ActionResult(action_id=call.id, result=execution.result_payload())
                    continue
                if kind == "frontend" and execution.status == ToolStatus.OK:
                    yield RequestSubmit(tool_id=call.id, params=execution.output)
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
                    content = done[call.id].model_content()
                    self._save(Role.TOOL, content=content, tool_call_id=call.id, tool_name=call.name)
