"""The native wire: each run event as its envelope's JSON object (`data: <json>`), as docs/protocol.md describes.

The runtime's assembler already ends every started call before the terminal event; a call the encoder still
sees open at the end (a stream cut short of its ends) gets its `tool.end` / `action.end` here, numbered after
the events before it, and every later event's `seq` moves up by one.
"""

from __future__ import annotations

from typing import Any

from agent_core.domain.events import ActionEnd, ActionStart, Event, ToolEnd
from agent_core.domain.ids import now_ms
from agent_core.runtime.envelope import Envelope
from agent_core.wires.encoder import OpenCall, SseData, Terminal, WireEncoderBase

Wire = dict[str, Any]


class NativeEncoder(WireEncoderBase[Wire]):
    """One run's events as native JSON objects."""

    def __init__(self, run_id: str = "", chat_id: str = "", request_id: str = "") -> None:
        super().__init__()
        self._ids = (run_id, chat_id, request_id)
        self._last: Envelope | None = None
        self._inserted = 0  # ends this encoder added: later events' seq moves up by as many
        self._actions: set[str] = set()

    def _wire(self, envelope: Envelope | Event) -> Wire:
        """The envelope's JSON object, its `seq` moved up by the ends added before it; a bare event (a run
        closed without its terminal event) is stamped after the last envelope."""
        if isinstance(envelope, Envelope):
            self._last = envelope
        else:
            envelope = self._stamp(envelope)
        wire = envelope.wire()
        wire["seq"] += self._inserted
        return wire

    def _stamp(self, event: Event) -> Envelope:
        last = self._last
        run_id, chat_id, request_id = (last.run_id, last.chat_id, last.request_id) if last else self._ids
        return Envelope(event, (last.seq if last else 0) + 1, now_ms(), run_id, chat_id, request_id)

    def frames(self, event: Event, envelope: Envelope | Event) -> list[Wire]:
        if isinstance(event, ActionStart):
            self._actions.add(event.action_id)
        if isinstance(event, ToolEnd | ActionEnd):
            self.calls.done(event.tool_id if isinstance(event, ToolEnd) else event.action_id)
        return [self._wire(envelope)]

    def close_call(self, call: OpenCall, terminal: Terminal) -> list[Wire]:
        actions = call.native_id in self._actions
        end: Event = ActionEnd(action_id=call.native_id) if actions else ToolEnd(tool_id=call.native_id)
        wire = self._wire(end)
        self._inserted += 1
        return [wire]

    def terminal(self, terminal: Terminal, closing: list[Wire], envelope: Envelope | Event) -> list[Wire]:
        return [*closing, self._wire(envelope)]

    def sse(self, frame: Any) -> SseData:
        return native_sse(frame)

    def frame_id(self, frame: Any, seq: int, index: int) -> str:
        return native_id(frame) or str(seq)


def native_sse(frame: Wire) -> SseData:
    """A native event as `data: <json>` (no event name)."""
    return frame, None


def native_id(frame: Wire) -> str | None:
    """A native event's SSE `id:` is its seq: `Last-Event-ID` resumes after it (GET /api/ap/runs/{runId}/events)."""
    seq = frame.get("seq")
    return None if seq is None else str(seq)
