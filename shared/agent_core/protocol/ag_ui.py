"""The AG-UI encoder: native run events -> AG-UI events (the `ag-ui-protocol` package's models).

RUN_STARTED first; text as TEXT_MESSAGE_START/CONTENT/END; reasoning as REASONING_START, a reasoning
message (START/CONTENT/END) and REASONING_END; every tool call as TOOL_CALL_START/ARGS/END, with
TOOL_CALL_RESULT for the calls the server ran (the client's frontend tools get none: the run ends for
the client to answer in its next run); RUN_FINISHED or RUN_ERROR last.
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
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.runtime.envelope import Envelope


def event_json(event: ag.BaseEvent) -> str:
    """An event's SSE data: camelCase JSON, unset optional fields left out (as the AG-UI SDK's encoder writes it)."""
    return event.model_dump_json(by_alias=True)


def _content(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


class AgUiEncoder:
    """Stateful translation for one AG-UI run."""

    def __init__(self, thread_id: str, run_id: str, *, client_tools: frozenset[str] = frozenset()) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.client_tools = client_tools
        self._server_calls: set[str] = set()
        self.closed = False

    def opening(self) -> list[ag.BaseEvent]:
        return [ag.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def feed(self, envelope: Envelope | Event) -> list[ag.BaseEvent]:
        event = envelope.event if isinstance(envelope, Envelope) else envelope
        if self.closed:
            return []
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
                if name not in self.client_tools:
                    self._server_calls.add(native)
                return [ag.ToolCallStartEvent(tool_call_id=native, tool_call_name=name)]
            case ToolArgs(tool_id=native, delta=delta) | ActionArgs(action_id=native, delta=delta):
                return [ag.ToolCallArgsEvent(tool_call_id=native, delta=delta)] if delta else []
            case ToolEnd(tool_id=native) | ActionEnd(action_id=native):
                return [ag.ToolCallEndEvent(tool_call_id=native)]
            case ToolResult(tool_id=native, result=result, status=status, reason=reason):
                outcome = result if status == "ok" else {"status": status, "reason": reason or status, "result": result}
                return self._result(native, outcome)
            case ActionResult(action_id=native, result=result):
                return self._result(native, result)
            case RunComplete():
                self.closed = True
                return [ag.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)]
            case RunCancel():
                self.closed = True
                return [ag.RunErrorEvent(message="the run was cancelled", code="cancelled")]
            case RunError(code=code, message=message):
                self.closed = True
                return [ag.RunErrorEvent(message=message, code=code)]
        return []

    def _result(self, native: str, result: Any) -> list[ag.BaseEvent]:
        if native not in self._server_calls:
            return []
        self._server_calls.discard(native)
        event = ag.ToolCallResultEvent(
            message_id=f"{native}-result", tool_call_id=native, content=_content(result), role="tool"
        )
        return [event]
