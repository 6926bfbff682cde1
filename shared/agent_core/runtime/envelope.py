"""The envelope every live event carries: type, seq (1, 2, ... per run), timestamp, runId (+ chat/request ids)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_core.domain.events import ActionEnd, ActionResult, ActionStart, Event, ToolEnd, ToolResult, ToolStart
from agent_core.domain.ids import now_ms

# Events that also carry chatId and requestId.
CARRY_IDS = frozenset({"request.query", "chat.start", "run.start", "run.complete", "run.error", "run.cancel"})


@dataclass(frozen=True)
class Envelope:
    event: Event
    seq: int
    timestamp: int
    run_id: str
    chat_id: str
    request_id: str

    @property
    def type(self) -> str:
        return self.event.type

    def wire(self) -> dict[str, Any]:
        """The native JSON object: envelope first, then the event's fields (empty ones omitted)."""
        body = self.event.wire()
        out: dict[str, Any] = {"type": body.pop("type"), "seq": self.seq, "timestamp": self.timestamp}
        out["runId"] = self.run_id
        if self.type in CARRY_IDS:
            out["chatId"] = self.chat_id
            out["requestId"] = self.request_id
        out.update(body)
        return out


TERMINAL = frozenset({"run.complete", "run.error", "run.cancel"})


def _event_types() -> dict[str, type[Event]]:
    found: dict[str, type[Event]] = {}
    pending = list(Event.__subclasses__())
    while pending:
        kind = pending.pop()
        pending += kind.__subclasses__()
        default = kind.model_fields["type"].default
        if isinstance(default, str):
            found[default] = kind
    return found


_EVENT_TYPES = _event_types()


def envelope_from_wire(wire: dict[str, Any]) -> Envelope:
    """The envelope a native JSON object was made from (`Envelope.wire`), as a run's log holds it."""
    fields = dict(wire)
    kind = str(fields.pop("type"))
    seq, timestamp, run_id = int(fields.pop("seq")), int(fields.pop("timestamp")), str(fields.pop("runId"))
    chat_id, request_id = str(fields.pop("chatId", "")), str(fields.pop("requestId", ""))
    event = _EVENT_TYPES[kind].model_validate(fields)
    return Envelope(event, seq, timestamp, run_id, chat_id, request_id)


class EventAssembler:
    """Stamps events in order and enforces the boundary rules: a result never precedes its call's end,
    and every call started has its end before the terminal event (a run cut off mid-call ends it)."""

    def __init__(self, run_id: str, chat_id: str, request_id: str, clock: Callable[[], int] = now_ms) -> None:
        self.run_id = run_id
        self.chat_id = chat_id
        self.request_id = request_id
        self._clock = clock
        self._seq = 0
        self._open: dict[str, type[ToolEnd] | type[ActionEnd]] = {}  # started calls without an end, in order

    @property
    def seq(self) -> int:
        """The last seq stamped."""
        return self._seq

    def resume_at(self, seq: int) -> None:
        """Go on stamping after `seq` (a run continued from its checkpoint: its events up to `seq` were sent)."""
        self._seq = seq

    def _stamp(self, event: Event) -> Envelope:
        self._seq += 1
        return Envelope(event, self._seq, self._clock(), self.run_id, self.chat_id, self.request_id)

    def process(self, event: Event) -> list[Envelope]:
        out: list[Envelope] = []
        if isinstance(event, ToolStart):
            self._open[event.tool_id] = ToolEnd
        elif isinstance(event, ActionStart):
            self._open[event.action_id] = ActionEnd
        elif isinstance(event, ToolEnd):
            self._open.pop(event.tool_id, None)
        elif isinstance(event, ActionEnd):
            self._open.pop(event.action_id, None)
        elif isinstance(event, ToolResult) and event.tool_id in self._open:
            out += self._close(event.tool_id)
        elif isinstance(event, ActionResult) and event.action_id in self._open:
            out += self._close(event.action_id)
        elif event.type in TERMINAL:
            for call_id in list(self._open):
                out += self._close(call_id)
        out.append(self._stamp(event))
        return out

    def _close(self, call_id: str) -> list[Envelope]:
        end = self._open.pop(call_id)
        return [self._stamp(ToolEnd(tool_id=call_id) if end is ToolEnd else ActionEnd(action_id=call_id))]
