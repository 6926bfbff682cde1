"""The Vercel AI SDK UI message stream wire's encoder: native run events -> UI message chunks (one assistant message).

SSE `data: <json>` per chunk, the response header `x-vercel-ai-ui-message-stream: v1`, and `data: [DONE]`
last. Text and reasoning blocks keep their native ids; tool parts are `dynamic`. A call the server ran says
`providerExecuted`; a call to one of the client's own tools does not, and gets no output here: the run ends
(`finish` with `tool-calls`) for the browser to run it (`onToolCall`) and send its output back.

A call that needs a person's approval (docs/approval.md) streams its input, then `tool-approval-request`
{approvalId, toolCallId} (ai 6's chunk: the part's state becomes `approval-requested`), and the run ends the
same way; the next request's message carries the part in state `approval-responded`
(`addToolApprovalResponse`). That stream continues the same message: the decided call's
`tool-output-available` (approved, it ran), `tool-output-denied` (denied) or `tool-output-error` (too late),
then the model's answer.
"""

from __future__ import annotations

import json
from typing import Any

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

Wire = dict[str, Any]
HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
DONE = "[DONE]"  # the last message's data
_FINISH = {"tool_calls": "tool-calls", "deadline": "length", "stop": "stop"}
_SERVER = {"providerExecuted": True, "dynamic": True}
_CLIENT = {"dynamic": True}


def _input(arguments: str) -> Any:
    """A call's arguments as the JSON value the UI shows (the raw text when it is not JSON)."""
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments


class UiStreamEncoder(WireEncoderBase[Wire | str]):
    """Stateful translation for one assistant message."""

    def __init__(
        self, message_id: str, *, client_tools: frozenset[str] = frozenset(), decided: frozenset[str] = frozenset()
    ) -> None:
        super().__init__()
        self.message_id = message_id
        self.client_tools = client_tools
        self._decided = decided  # calls of the continued message whose approval this request decided
        self._pieces: dict[str, list[str]] = {}  # native id -> the call's argument pieces so far

    @classmethod
    def of_run(cls, run: Run, client_tools: frozenset[str] = frozenset()) -> UiStreamEncoder:
        """The run's encoder, from what its RUN item keeps (the live stream's and every resume's alike): the
        message it continues (else its own `msg_{runId}`) and the calls its request decided."""
        message_id = run.ui_message_id or f"msg_{run.run_id}"
        return cls(message_id, client_tools=client_tools, decided=frozenset(run.decided_call_ids))

    def opening(self) -> list[Wire | str]:
        return [{"type": "start", "messageId": self.message_id}]

    def frames(self, event: Event, envelope: Envelope | Event) -> list[Wire | str]:
        if isinstance(event, ToolStart | ToolArgs | ToolEnd) and event.tool_id in self._decided:
            return []  # a call of the continued message, decided by this request: only its output is new
        match event:
            case ContentStart(content_id=native):
                return [{"type": "text-start", "id": native}]
            case ContentDelta(content_id=native, delta=delta) if delta:
                return [{"type": "text-delta", "id": native, "delta": delta}]
            case ContentEnd(content_id=native):
                return [{"type": "text-end", "id": native}]
            case ReasoningStart(reasoning_id=native):
                return [{"type": "reasoning-start", "id": native}]
            case ReasoningDelta(reasoning_id=native, delta=delta) if delta:
                return [{"type": "reasoning-delta", "id": native, "delta": delta}]
            case ReasoningEnd(reasoning_id=native):
                return [{"type": "reasoning-end", "id": native}]
            case ToolStart(tool_id=native, tool_name=name) | ActionStart(action_id=native, action_name=name):
                self._pieces[native] = []
                return [{"type": "tool-input-start", "toolCallId": native, "toolName": name, **self._owner(name)}]
            case ToolArgs(tool_id=native, delta=delta) | ActionArgs(action_id=native, delta=delta):
                if native not in self.calls or not delta:
                    return []
                self._pieces[native].append(delta)
                return [{"type": "tool-input-delta", "toolCallId": native, "inputTextDelta": delta}]
            case ToolEnd(tool_id=native) | ActionEnd(action_id=native):
                call = self.calls.get(native)
                if call is None:
                    return []
                available = {"toolCallId": native, "toolName": call.name, "input": self._input(native)}
                return [{"type": "tool-input-available", **available, **self._owner(call.name)}]
            case ToolApproval(tool_id=native) if native in self.calls:
                run_id = envelope.run_id if isinstance(envelope, Envelope) else ""
                asked = approval_request_id(run_id, native)
                return [{"type": "tool-approval-request", "approvalId": asked, "toolCallId": native}]
            case ToolResult(tool_id=native, result=result, status=status, reason=reason):
                return self._output(native, result, status, reason)
            case ActionResult(action_id=native, result=result):
                return self._output(native, result, "ok", None)
        return []

    def close_call(self, call: OpenCall, terminal: Terminal) -> list[Wire | str]:
        """A call whose input was cut off ends as `tool-input-error`; one awaiting its output gets nothing (the
        `error` or `abort` after it says why)."""
        if call.ended:
            return []
        where = {"toolCallId": call.native_id, "toolName": call.name, "input": self._input(call.native_id)}
        text = "the run was cancelled" if isinstance(terminal, RunCancel) else "the run failed"
        return [{"type": "tool-input-error", **where, "errorText": text, **self._owner(call.name)}]

    def terminal(self, terminal: Terminal, closing: list[Wire | str], envelope: Envelope | Event) -> list[Wire | str]:
        match terminal:
            case RunComplete(finish_reason=finish_reason):
                return [*closing, {"type": "finish", "finishReason": _FINISH.get(finish_reason, "other")}]
            case RunCancel():
                return [*closing, {"type": "abort"}]
        text = f"[{terminal.code}] {terminal.message}"
        if terminal.retry_after is not None:  # a refused turn: the chunk has only `errorText` (a strict schema)
            text += f" (retry after {terminal.retry_after} s; remaining: {json.dumps(terminal.remaining or {})})"
        return [*closing, {"type": "error", "errorText": text}]

    def trailer(self) -> list[Wire | str]:
        return [DONE]

    def sse(self, frame: Any) -> SseData:
        return frame, None

    def _input(self, native: str) -> Any:
        return _input("".join(self._pieces.get(native, [])))

    def _owner(self, name: str) -> dict[str, bool]:
        """Who runs the call: the server (`providerExecuted`), or the browser (one of its declared tools)."""
        return _CLIENT if name in self.client_tools else _SERVER

    def _output(self, native: str, result: Any, status: str, reason: str | None) -> list[Wire | str]:
        if self.calls.done(native) is None:
            return []
        self._pieces.pop(native, None)
        if native in self._decided and reason == "approval_denied":
            return [{"type": "tool-output-denied", "toolCallId": native}]
        if status == "ok":
            return [{"type": "tool-output-available", "toolCallId": native, "output": result, **_SERVER}]
        text = f"{status}: {reason or status}"
        return [{"type": "tool-output-error", "toolCallId": native, "errorText": text, **_SERVER}]
