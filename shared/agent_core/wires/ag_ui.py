"""The AG-UI wire's encoder: native run events -> AG-UI events (the `ag-ui-protocol` package's models).

RUN_STARTED first; text as TEXT_MESSAGE_START/CONTENT/END; reasoning as REASONING_START, a reasoning
message (START/CONTENT/END) and REASONING_END; every tool call as TOOL_CALL_START/ARGS/END, with
TOOL_CALL_RESULT for the calls the server ran (the client's frontend tools get none: the run ends for
the client to answer in its next run); RUN_FINISHED or RUN_ERROR last.

A call that needs a person's approval (docs/approval.md) is put to the frontend as a client tool call it
renders: after the call's own TOOL_CALL_START/ARGS/END, a call of `approve_tool_call` (its id is the
approval request's, arguments {toolCallId, toolName, args, reason}), then RUN_FINISHED. The next run's `tool`
message for that id carries {approve, reason?}; that run's stream starts with the decided call's
TOOL_CALL_RESULT (its output, or why it did not run).
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import events as ag

from agent_core.domain.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunCancel,
    RunComplete,
    RunError,
    ToolApproval,
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.domain.models import Run
from agent_core.runtime.envelope import Envelope
from agent_core.wires.approval_answers import approval_request_id
from agent_core.wires.encoder import OpenCall, SseData, Terminal, WireEncoderBase


def event_json(event: ag.BaseEvent) -> str:
    """An event's SSE data: camelCase JSON, unset optional fields left out (as the AG-UI SDK's encoder writes it)."""
    return event.model_dump_json(by_alias=True)


APPROVAL_TOOL = "approve_tool_call"  # the client tool an approval is put to the frontend as


def _refusal(error: RunError) -> dict[str, Any] | None:
    """A budget's or the rate limit's refusal: Retry-After and what remains, in the event's `metadata`."""
    if error.retry_after is None:
        return None
    return {"retryAfter": error.retry_after, "limit": error.limit, "remaining": error.remaining}


def _content(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


class AgUiEncoder(WireEncoderBase[ag.BaseEvent]):
    """Stateful translation for one AG-UI run."""

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        *,
        client_tools: frozenset[str] = frozenset(),
        decided: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self.thread_id, self.run_id = thread_id, run_id
        self.client_tools = client_tools
        self._decided = decided  # calls of an earlier run whose approval this run's input decided

    @classmethod
    def of_run(cls, thread_id: str, run_id: str, run: Run, client_tools: frozenset[str] = frozenset()) -> AgUiEncoder:
        """The encoder of `run` (the client's `run_id` for it), from what its RUN item keeps (the live stream's
        and every reconnect's alike): the calls its input decided."""
        return cls(thread_id, run_id, client_tools=client_tools, decided=frozenset(run.decided_call_ids))

    def opening(self) -> list[ag.BaseEvent]:
        return [ag.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def frames(self, event: Event, envelope: Envelope | Event) -> list[ag.BaseEvent]:
        if isinstance(event, ToolStart | ToolArgs | ToolEnd) and event.tool_id in self._decided:
            return []  # an earlier run's call, decided by this run's input: only its result is new
        match event:
            case ContentStart(content_id=native):
                return [ag.TextMessageStartEvent(message_id=native, role="assistant")]
            case ContentDelta(content_id=native, delta=delta) if delta:
                return [ag.TextMessageContentEvent(message_id=native, delta=delta)]
            case ContentEnd(content_id=native):
                return [ag.TextMessageEndEvent(message_id=native)]
            case ReasoningStart(reasoning_id=native):
                return [ag.ReasoningStartEvent(message_id=native), ag.ReasoningMessageStartEvent(message_id=native)]
            case ReasoningDelta(reasoning_id=native, delta=delta) if delta:
                return [ag.ReasoningMessageContentEvent(message_id=native, delta=delta)]
            case ReasoningEnd(reasoning_id=native):
                return [ag.ReasoningMessageEndEvent(message_id=native), ag.ReasoningEndEvent(message_id=native)]
            case ToolStart(tool_id=native, tool_name=name) | ActionStart(action_id=native, action_name=name):
                return [ag.ToolCallStartEvent(tool_call_id=native, tool_call_name=name)]
            case ToolArgs(tool_id=native, delta=delta) | ActionArgs(action_id=native, delta=delta):
                return [ag.ToolCallArgsEvent(tool_call_id=native, delta=delta)] if delta else []
            case ToolEnd(tool_id=native) | ActionEnd(action_id=native):
                call = self.calls.get(native)
                if call is not None and call.name in self.client_tools:  # the client answers it in its next run
                    self.calls.done(native)
                return [ag.ToolCallEndEvent(tool_call_id=native)]
            case ToolApproval(tool_id=native, tool_name=name, args=args, reason=reason) if native in self.calls:
                asked = approval_request_id(envelope.run_id if isinstance(envelope, Envelope) else "", native)
                question = {"toolCallId": native, "toolName": name, "args": args, "reason": reason}
                return [
                    ag.ToolCallStartEvent(tool_call_id=asked, tool_call_name=APPROVAL_TOOL),
                    ag.ToolCallArgsEvent(tool_call_id=asked, delta=json.dumps(question, ensure_ascii=False)),
                    ag.ToolCallEndEvent(tool_call_id=asked),
                ]
            case ToolResult(tool_id=native, result=result, status=status, reason=reason):
                outcome = result if status == "ok" else {"status": status, "reason": reason or status, "result": result}
                return self._result(native, outcome)
            case ActionResult(action_id=native, result=result):
                return self._result(native, result)
        return []

    def close_call(self, call: OpenCall, terminal: Terminal) -> list[ag.BaseEvent]:
        """A call whose arguments were cut off gets its TOOL_CALL_END; one awaiting its result gets none (the
        RUN_ERROR after it says why)."""
        return [] if call.ended else [ag.ToolCallEndEvent(tool_call_id=call.native_id)]

    def terminal(
        self, terminal: Terminal, closing: list[ag.BaseEvent], envelope: Envelope | Event
    ) -> list[ag.BaseEvent]:
        match terminal:
            case RunComplete():
                return [*closing, ag.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)]
            case RunCancel():
                return [*closing, ag.RunErrorEvent(message="the run was cancelled", code="cancelled")]
        return [*closing, ag.RunErrorEvent(message=terminal.message, code=terminal.code, metadata=_refusal(terminal))]

    def sse(self, frame: Any) -> SseData:
        return event_json(frame), None

    def _result(self, native: str, result: Any) -> list[ag.BaseEvent]:
        if self.calls.done(native) is None:  # not a server call (or already answered)
            return []
        event = ag.ToolCallResultEvent(
            message_id=f"{native}-result", tool_call_id=native, content=_content(result), role="tool"
        )
        return [event]
