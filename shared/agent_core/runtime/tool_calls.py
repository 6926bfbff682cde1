"""The run's tool calls: announced, ended (a frontend call's wait opened first), executed in parallel, saved.

A part of `live_run.LiveRun` (the `RunActions` a strategy uses for tools); each call's record and its
call/result messages land in the recorder.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator

from agent_core.domain.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    Event,
    RequestSubmit,
    ToolApproval,
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.domain.models import Role, ToolCall, ToolCallRecord, ToolStatus
from agent_core.guardrails.guard import Guard
from agent_core.runtime.approvals import DecidedGate, RunWaits
from agent_core.runtime.checkpoint import StepCheckpoints
from agent_core.runtime.executor import execute_parallel
from agent_core.runtime.recorder import RunRecorder
from agent_core.runtime.run_protocol import OnResult
from agent_core.runtime.scope import RunScope
from agent_core.runtime.toolset import Toolset
from agent_core.runtime.turn import PreparedTurn
from agent_core.tools.base import ToolContext
from agent_core.tools.service import ToolExecution


class ToolCalls:
    """Tool calls of one run, over its toolset and frontend bridge."""

    turn: PreparedTurn
    scope: RunScope
    recorder: RunRecorder
    toolset: Toolset
    bridge: RunWaits
    checkpoints: StepCheckpoints
    guard: Guard | None

    def tool_context(self) -> ToolContext:
        turn, run = self.turn, self.turn.run
        return ToolContext(
            request_id=run.request_id,
            conversation_id=run.chat_id,
            user_id=run.user_id,
            settings=turn.deps.settings,
            timezone=turn.timezone,
            now=turn.now,
            run_id=run.run_id,
            blobs=turn.deps.blobs,
            frontend=self.bridge,
            approvals=self.bridge if turn.request.approvals == "wait" else DecidedGate(turn.request.decided),
            memory=turn.deps.memory_store,
            records=turn.deps.memory,
            public_base_url=turn.request.public_base_url,
            links=turn.deps.data_links,
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

    async def end_calls(self, ends: list[tuple[ToolCall, Event]], *, handed: bool = False) -> AsyncIterator[Event]:
        """Each call's end event; a frontend call the run waits for has its WAIT item written before its end is
        sent (a call `handed` to the caller has none: the run ends, the caller's next request brings its
        output), a call that needs approval has its approval WAIT item written, then its end and its
        `tool.approval` sent.

        With `hand_over` approvals only calls `handed` to the caller (the function loop's hand-over) ask: a path
        that runs its calls itself cannot end the run for an answer, so its call asks nobody (it is refused).
        """
        kinds, settings = self.toolset.kinds, self.turn.deps.settings
        hand_over = self.turn.request.approvals == "hand_over"
        for call, end in ends:
            if kinds.get(call.name) == "frontend" and not handed:
                await self.bridge.open_wait(call.id, settings.frontend_submit_timeout_ms)
            asked = self.toolset.service.approval_reason(call)
            if asked is None or (hand_over and not handed) or self.turn.request.approvals == "refuse":
                yield end
                continue
            args = json.loads(call.arguments or "{}")  # valid: a call with invalid arguments asks nobody
            timeout_ms = settings.tool_approval_timeout_ms
            await self.bridge.open_approval(call.id, call.name, args, asked, timeout_ms, handed_over=hand_over)
            yield end
            yield ToolApproval(tool_id=call.id, tool_name=call.name, args=args, reason=asked)

    def hands_over(self, call: ToolCall) -> bool:
        """The caller runs the call (a client tool), or decides it in a later request (`hand_over` approvals)."""
        if call.name in self.turn.request.client_tools:
            return True
        return self.turn.request.approvals == "hand_over" and self.toolset.service.approval_reason(call) is not None

    async def run_decided(self) -> AsyncIterator[Event]:
        """The calls this request decided (handed over for approval by the run before): announced and run as
        decided (approved: the tool runs; denied: the model reads the denial), before the model is called.

        A run continued from its checkpoint runs the calls it waited for (announced before it stopped)."""
        checkpoint = self.turn.checkpoint
        if checkpoint is not None:
            async for event in self.run_calls(list(checkpoint.pending), resumed=True):
                yield event
            return
        calls = [decided.call for decided in self.turn.request.decided]
        if not calls:
            return
        async for event in self.announce(calls):
            yield event
        for call in calls:
            yield self.end_event(call)
        async for event in self.run_calls(calls, resumed=True):
            yield event

    async def run_calls(
        self, calls: list[ToolCall], *, content: str = "", on_result: OnResult | None = None, resumed: bool = False
    ) -> AsyncIterator[Event]:
        """Execute calls in parallel; events in completion order; the call/result messages saved in call order
        (`resumed`: the calls are already in the history, only their results are saved)."""
        recorder = self.recorder
        calls = [recorder.checked(call) for call in calls]  # arguments as the tool-argument check let them
        if not resumed:
            recorder.save(Role.ASSISTANT, content=content, tool_calls=calls)
        kinds = self.toolset.kinds
        done: dict[str, ToolExecution] = {}
        self.checkpoints.begin(calls)
        executions = execute_parallel(self.toolset.service, calls, self.tool_context())
        try:
            while True:
                try:
                    execution = await self.scope.next_item(executions)
                except StopAsyncIteration:
                    break
                execution = await self._checked_result(execution)
                call = execution.call
                done[call.id] = execution
                recorder.outcome.records.append(
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
                self.checkpoints.done(call, execution.model_content())
                await self.checkpoints.settle()  # the others may all wait on people now
        finally:
            self.checkpoints.end()
            await executions.aclose()
            for call in calls:
                if call.id in done:
                    text = done[call.id].model_content()
                    recorder.save(Role.TOOL, content=text, tool_call_id=call.id, tool_name=call.name)

    async def _checked_result(self, execution: ToolExecution) -> ToolExecution:
        """The tool-result guardrail: the output masked before anyone sees it (the client, the store, the
        model), or the run stopped (`guardrail_intervened`)."""
        guard = self.guard
        if guard is None or not guard.checks("tool_results"):
            return execution
        if execution.output is not None:
            execution = dataclasses.replace(
                execution, output=await guard.screen_value("tool_results", execution.output)
            )
        if execution.message:
            execution = dataclasses.replace(execution, message=await guard.screen("tool_results", execution.message))
        return execution

    def calls_made(self) -> list[ToolCall]:
        return [call for message in self.recorder.outcome.messages for call in message.tool_calls]

    def result_of(self, call_id: str) -> str:
        for message in reversed(self.recorder.outcome.messages):
            if message.tool_call_id == call_id:
                return message.content
        return ""
