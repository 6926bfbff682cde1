"""The run: routing, then the agent's strategy, over shared primitives (stream a model step, run tool calls).

`TurnRunner` implements `run_protocol.AgentRun`, the only thing strategies see of it. Behind that interface
it stamps events, keeps the replay snapshot, honours the deadline and cancellation, renews the lease, and
persists the run once at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from agent_core.domain.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    ChatStart,
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    FinishReason,
    RequestQuery,
    RequestSubmit,
    RunCancel,
    RunComplete,
    RunError,
    RunStart,
    RunWarning,
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.domain.ids import now_ms as wall_ms
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Message, Role, RunStatus, ToolCall, ToolCallRecord, ToolStatus
from agent_core.errors import AgentError, DeadlineExceeded
from agent_core.llm.base import LlmRequest
from agent_core.memory.window import build_window, to_chat_message
from agent_core.observability import logger
from agent_core.runtime.cancel import CancelWatch, RunCancelled
from agent_core.runtime.composer import separator
from agent_core.runtime.envelope import Envelope, EventAssembler
from agent_core.runtime.executor import execute_parallel
from agent_core.runtime.finish import RunOutcome, abandon_run, persist_run
from agent_core.runtime.frontend import StoreFrontendBridge
from agent_core.runtime.lease import LeaseKeeper
from agent_core.runtime.replay import SnapshotBuilder
from agent_core.runtime.router import route_and_run
from agent_core.runtime.run_protocol import OnResult, Purpose
from agent_core.runtime.settle import to_the_end
from agent_core.runtime.step import StepAssembler, StreamedStep
from agent_core.runtime.toolset import Toolset, build_toolset
from agent_core.runtime.turn import PreparedTurn
from agent_core.tools.base import ToolContext
from agent_core.tools.service import ToolExecution
from agent_core.tracing import traced_run

T = TypeVar("T")
DISCONNECTED = "client_disconnected"
_tool_events = (ToolStart, ToolArgs, ActionStart, ActionArgs)


class DeadlineReached(Exception):
    """The turn deadline passed: the turn ends with run.error `deadline_exceeded`."""


class TurnRunner:
    """Drives one prepared turn and yields its stamped events; `turn.result` is set when it completes."""

    def __init__(self, turn: PreparedTurn, toolset: Toolset | None = None) -> None:
        self.turn = turn
        self.deps = turn.deps
        self.run = turn.run
        self.agent = turn.agent
        self.outcome = RunOutcome()
        self.toolset = toolset or build_toolset(turn.agent, turn.deps.tools)
        self.assembler = EventAssembler(self.run.run_id, self.run.chat_id, self.run.request_id)
        self.snapshot = SnapshotBuilder()
        self.started = time.monotonic()
        # Buffered routes pass their own deadline; streams get the stream deadline (below Lambda's limit).
        deadline_ms = turn.request.deadline_ms or self.deps.settings.stream_deadline_ms
        self.deadline = self.started + deadline_ms / 1000 if deadline_ms else None
        local = self.deps.cancels.register(self.run.run_id)
        self.cancel = CancelWatch(self.deps.store, self.run.chat_id, self.run.run_id, local)
        s = self.deps.settings
        self.lease = LeaseKeeper(
            self.deps.store, self.run.chat_id, self.run.run_id, s.run_heartbeat_ms, s.run_lease_ms, wall_ms
        )
        self.bridge = StoreFrontendBridge(self.deps.store, self.run.run_id, self.run.user_id)
        self.finish_reason: FinishReason = "stop"
        self._ended = False
        self._blocks = 0
        self._answer_start: str | None = None
        self.warnings: list[RunWarning] = []

    @property
    def message(self) -> str:
        return self.turn.question

    @property
    def client_tools(self) -> frozenset[str]:
        return self.turn.request.client_tools

    # ----- the run's events -----

    def _emit(self, event: Event) -> list[Envelope]:
        envelopes = self.assembler.process(event)
        for envelope in envelopes:
            self.snapshot.feed(envelope)
        return envelopes

    @traced_run  # the run's `invoke_agent` span (agent_core/tracing.py)
    async def events(self) -> AsyncIterator[Envelope]:
        turn, run = self.turn, self.run
        self.cancel.start()
        self.lease.start()
        mcp_run = None
        try:
            preamble: list[Event] = []
            if turn.request.stored_message is not None:  # a continuation by tool results has no user message
                preamble.append(RequestQuery(message=turn.request.stored_message, agent_key=turn.agent.key))
            if turn.created_chat:
                preamble.append(ChatStart(chat_name=turn.chat.title))
            preamble.append(RunStart(agent_key=turn.agent.key, model=run.model))
            for event in preamble:
                for envelope in self._emit(event):
                    yield envelope
            terminal: Event
            try:
                if self.agent.mcp_servers and self.deps.mcp is not None:
                    mcp_run = self.deps.mcp.run(self.agent.mcp_servers)
                    tools, warnings = await self.guarded(mcp_run.tools())
                    self.toolset = build_toolset(self.agent, self.deps.tools, extra=tools)
                    self.warnings += [RunWarning(code=code, message=message) for code, message in warnings]
                for warning in self.warnings:
                    for envelope in self._emit(warning):
                        yield envelope
                async for event in route_and_run(self, turn):
                    for envelope in self._emit(event):
                        yield envelope
                terminal = RunComplete.of(self.finish_reason, self.outcome.usage, self.outcome.answered_by)
                status = RunStatus.COMPLETED
            except DeadlineReached:
                # An outage must not look like an answer: no partial text is stored as one.
                self.finish_reason = "deadline"
                message = "the turn ran out of time before the model finished"
                terminal, status = RunError(code=DeadlineExceeded.code, message=message), RunStatus.FAILED
            except RunCancelled as cancelled:
                terminal, status = RunCancel(reason=cancelled.reason), RunStatus.CANCELLED
            except AgentError as error:
                terminal, status = RunError(code=error.code, message=error.message), RunStatus.FAILED
            except Exception as exc:
                logger.exception("run failed", extra={"runId": run.run_id})
                message = f"the run failed unexpectedly ({type(exc).__name__})"
                terminal, status = RunError(code="internal_error", message=message), RunStatus.FAILED
            envelopes = self._emit(terminal)
            # Shielded: a client that goes away while the end is being stored does not interrupt it.
            for envelope in await to_the_end(self._end(status, terminal, envelopes)):
                yield envelope
        except (GeneratorExit, asyncio.CancelledError):
            # The client went away (visible locally): the run stops and keeps what it had.
            if not self._ended:
                terminal = RunCancel(reason=DISCONNECTED)
                await to_the_end(self._end(RunStatus.CANCELLED, terminal, self._emit(terminal)))
            raise
        finally:
            await self.lease.stop()
            await self.cancel.stop()
            self.deps.cancels.unregister(run.run_id)
            if mcp_run is not None:
                await mcp_run.aclose()

    async def _end(self, status: RunStatus, terminal: Event, envelopes: list[Envelope]) -> list[Envelope]:
        """Store the run's end; the envelopes to send last (the terminal one replaced if that failed)."""
        self._ended = True
        await self.lease.stop()  # no renewal may race the release
        await self.bridge.close()  # before the end is stored: no submit is accepted once the run has ended
        entries = self.snapshot.entries()
        try:
            await persist_run(self.turn, self.outcome, status, terminal, self.finish_reason, entries)
            return envelopes
        except Exception as exc:
            logger.exception("the end of the run could not be stored", extra={"runId": self.run.run_id})
            code = exc.code if isinstance(exc, AgentError) else "internal_error"
            error = RunError(code=code, message="the answer could not be stored; please ask again")
        # The terminal event was not sent yet: the client gets the error in its place, with its seq.
        final = dataclasses.replace(envelopes[-1], event=error)
        kept = [e for e in entries if e["type"] in ("request.query", "chat.start", "run.start")]
        await abandon_run(self.turn, error, [*kept, final.wire()])
        return [*envelopes[:-1], final]

    # ----- waiting, with the deadline and cancellation -----

    async def next_item(self, iterator: AsyncIterator[T]) -> T:
        """The next item, unless the run is cancelled or the deadline passes first."""
        self.cancel.raise_if_cancelled()
        remaining = None if self.deadline is None else self.deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise DeadlineReached
        item = asyncio.ensure_future(anext(iterator))
        stop = asyncio.ensure_future(self.cancel.event.wait())
        try:
            done, _ = await asyncio.wait({item, stop}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller went away: stop reading so the iterator can be closed cleanly afterwards.
            item.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await item
            raise
        finally:
            stop.cancel()
        if item in done:
            return item.result()
        item.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
            await item
        if self.cancel.event.is_set():
            raise RunCancelled(self.cancel.cancel_reason)
        raise DeadlineReached

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        """Await one thing under the same deadline and cancellation rules."""

        async def once() -> AsyncIterator[T]:
            yield await awaitable

        return await self.next_item(once())

    def check_cancelled(self) -> None:
        self.cancel.raise_if_cancelled()

    # ----- prompt and history -----

    def window(self, system_prompt: str | None = None, *, include_run: bool = True) -> list[dict[str, Any]]:
        """The prompt window plus (unless told otherwise) what this run has added so far."""
        s = self.deps.settings
        window = build_window(
            system_prompt or self.agent.system_prompt,
            self.turn.summary,
            self.turn.history.items,
            max_tokens=s.memory_max_prompt_tokens,
            tool_output_chars=s.tool_output_window_chars,
            extra_system=self.turn.extra_system,
        )
        if not include_run:
            return window.messages
        return window.messages + [to_chat_message(m, s.tool_output_window_chars) for m in self.outcome.messages]

    def save(self, role: Role, **fields: Any) -> Message:
        at = self.turn.clock_ms()
        message = Message(
            id=sortable_id(at),
            chat_id=self.run.chat_id,
            role=role,
            run_id=self.run.run_id,
            request_id=self.run.request_id,
            created_at=at,
            **fields,
        )
        self.outcome.messages.append(message)
        return message

    def answer(
        self,
        text: str,
        finish_reason: FinishReason = "stop",
        *,
        calls: list[ToolCall] | None = None,
        stored: str | None = None,
    ) -> None:
        """The run's final answer: saved as the ASSISTANT message and returned to blocking callers."""
        start = self._answer_start
        if start is None:
            self.outcome.final_text = text
        else:  # a paragraph break between, unless the text brings its own (a step's lead streams one)
            joint = "" if text[:1].isspace() else separator(start)
            self.outcome.final_text = f"{start}{joint}{text}".rstrip()
        fields: dict[str, Any] = {} if calls is None else {"tool_calls": calls}
        self.save(Role.ASSISTANT, content=text if stored is None else stored, **fields)
        self.finish_reason = finish_reason

    def begin_answer(self, text: str) -> None:
        """The answer starts with `text` (streamed and saved already); what `answer` gets follows it."""
        self._answer_start = text
        self.outcome.final_text = text.rstrip()

    def result_of(self, call_id: str) -> str:
        for message in reversed(self.outcome.messages):
            if message.tool_call_id == call_id:
                return message.content
        return ""

    # ----- model steps -----

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
        request = LlmRequest(model=self.run.model, messages=messages, tools=tools or [], purpose=purpose)
        hidden: tuple[type[Event], ...] = _tool_events if not tools else ()
        if not forward_content:
            hidden = (*hidden, ContentStart, ContentDelta, ContentEnd)
        return StreamedStep(assembler, self._stream(assembler, request, hidden, forward_content))

    async def _stream(
        self, assembler: StepAssembler, request: LlmRequest, hidden: tuple[type[Event], ...], forward_content: bool
    ) -> AsyncIterator[Event]:
        stream = self.deps.llm.stream(request)
        try:
            while True:
                try:
                    delta = await self.next_item(stream)
                except StopAsyncIteration:
                    break
                if delta.model:
                    self.outcome.answered_by = delta.model
                if self.outcome.first_token_at is None and (delta.content or delta.reasoning or delta.tool_calls):
                    self.outcome.first_token_at = time.monotonic() - self.started
                events = assembler.feed(delta)
                if hidden:
                    events = [e for e in events if not isinstance(e, hidden)]
                for event in events:
                    yield event
        except (DeadlineReached, RunCancelled):
            for event in assembler.finish():
                if forward_content or not isinstance(event, ContentEnd):
                    yield event
            self.outcome.usage = self.outcome.usage.add(assembler.usage)
            if forward_content and assembler.text():
                self.outcome.partial_text = assembler.text()
                self.outcome.final_text = assembler.text()
            raise
        except AgentError:
            if forward_content:
                self.outcome.partial_text = assembler.text()
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        self.outcome.usage = self.outcome.usage.add(assembler.usage)
        for event in assembler.finish():
            if forward_content or not isinstance(event, ContentEnd):
                yield event

    async def text_block(self, text: str) -> AsyncIterator[Event]:
        """Content produced by the run itself (filler lines, closing messages, ReAct answers)."""
        content_id = f"m_{self.new_block_id()}"
        yield ContentStart(content_id=content_id)
        yield ContentDelta(content_id=content_id, delta=text)
        yield ContentEnd(content_id=content_id)

    # ----- tool calls -----

    def tool_context(self) -> ToolContext:
        return ToolContext(
            request_id=self.run.request_id,
            conversation_id=self.run.chat_id,
            user_id=self.run.user_id,
            settings=self.deps.settings,
            timezone=self.turn.timezone,
            now=self.turn.now,
            run_id=self.run.run_id,
            blobs=self.deps.blobs,
            frontend=self.bridge,
            memory=self.deps.store,
            public_base_url=self.turn.request.public_base_url,
            links=self.deps.data_links,
        )

    async def announce(self, calls: list[ToolCall]) -> AsyncIterator[Event]:
        """Start and args events for calls the run makes itself (quick rules, ReAct)."""
        kinds = self.toolset.kinds
        for call in calls:
            if kinds.get(call.name) == "action":
                yield ActionStart(action_id=call.id, action_name=call.name)
                yield ActionArgs(action_id=call.id, delta=call.arguments, chunk_index=0)
                continue
            yield ToolStart(tool_id=call.id, tool_name=call.name, tool_type=kinds.get(call.name, "backend"))
            yield ToolArgs(tool_id=call.id, delta=call.arguments, chunk_index=0)

    def end_event(self, call: ToolCall) -> Event:
        if self.toolset.kinds.get(call.name) == "action":
            return ActionEnd(action_id=call.id)
        return ToolEnd(tool_id=call.id)

    async def end_calls(self, ends: list[tuple[ToolCall, Event]]) -> AsyncIterator[Event]:
        """Each call's end event; a frontend call's WAIT item is written before its end is sent."""
        kinds = self.toolset.kinds
        for call, end in ends:
            if kinds.get(call.name) == "frontend":
                await self.bridge.open_wait(call.id, self.deps.settings.frontend_submit_timeout_ms)
            yield end

    async def run_calls(
        self, calls: list[ToolCall], *, content: str = "", on_result: OnResult | None = None
    ) -> AsyncIterator[Event]:
        """Execute calls in parallel; events in completion order; the call/result messages saved in call order."""
        self.save(Role.ASSISTANT, content=content, tool_calls=calls)
        kinds = self.toolset.kinds
        done: dict[str, ToolExecution] = {}
        executions = execute_parallel(self.toolset.service, calls, self.tool_context())
        try:
            while True:
                try:
                    execution = await self.next_item(executions)
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
                else:
                    if kind == "frontend" and execution.status == ToolStatus.OK:
                        yield RequestSubmit(tool_id=call.id, params=execution.output)
                    yield ToolResult(
                        tool_id=call.id,
                        result=execution.result_payload(),
                        status=execution.status.value,
                        reason=execution.reason or None,
                    )
                if on_result is not None:
                    async for event in on_result(execution):
                        yield event
        finally:
            await executions.aclose()
            for call in calls:
                if call.id in done:
                    text = done[call.id].model_content()
                    self.save(Role.TOOL, content=text, tool_call_id=call.id, tool_name=call.name)
