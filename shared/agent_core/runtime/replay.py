"""Replay snapshots: a run's live events folded to snapshot granularity, stored once per run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_core.domain.events import TERMINAL_TYPES, Event, RequestQuery
from agent_core.domain.models import Run
from agent_core.runtime.envelope import Envelope

# Live events kept as they are in a replay.
KEPT = frozenset(
    {"request.query", "run.route", "tool.approval", "tool.result", "action.result", "request.submit"} | TERMINAL_TYPES
)


@dataclass
class _Block:
    """An open text or call block: its snapshot fields and the seq/timestamp of its latest event."""

    entry: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    seq: int = 0
    timestamp: int = 0


def _head(envelope: Envelope, type_: str) -> dict[str, Any]:
    return {"type": type_, "seq": envelope.seq, "timestamp": envelope.timestamp, "runId": envelope.run_id}


class SnapshotBuilder:
    """Feeds on the stamped live events; `entries()` is the run's replay list."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self._open: dict[str, _Block] = {}

    def feed(self, envelope: Envelope) -> None:
        wire = envelope.wire()
        kind = envelope.type
        if kind in KEPT:
            self._entries.append(wire)
            return
        family, _, phase = kind.rpartition(".")
        key_field = {"reasoning": "reasoningId", "content": "contentId", "tool": "toolId", "action": "actionId"}.get(
            family
        )
        if key_field is None or key_field not in wire:
            return
        key = f"{family}:{wire[key_field]}"
        if phase == "start":
            entry = _head(envelope, f"{family}.snapshot")
            entry[key_field] = wire[key_field]
            if family == "tool":
                entry.update(toolName=wire["toolName"], toolType=wire["toolType"])
            if family == "action":
                entry["actionName"] = wire["actionName"]
            self._open[key] = _Block(entry, seq=envelope.seq, timestamp=envelope.timestamp)
            return
        block = self._open.get(key)
        if block is None:
            return
        block.seq, block.timestamp = envelope.seq, envelope.timestamp
        if phase in ("delta", "args"):
            block.parts.append(wire["delta"])
        elif phase == "end":
            self._close(key)

    def _close(self, key: str) -> None:
        block = self._open.pop(key)
        entry = dict(block.entry)
        entry["seq"], entry["timestamp"] = block.seq, block.timestamp
        text = "".join(block.parts)
        entry["args" if entry["type"] in ("tool.snapshot", "action.snapshot") else "text"] = text
        self._entries.append(entry)

    def entries(self) -> list[dict[str, Any]]:
        """The replay list; blocks a failed or cancelled run left open are closed with what they had."""
        for key in list(self._open):
            self._close(key)
        return sorted(self._entries, key=lambda e: int(e["seq"]))


def ended_unstarted(run: Run, terminal: Event, at_ms: int, question: str | None) -> list[dict[str, Any]]:
    """The replay of a run that streamed nothing (it never started, or its process died): its question as
    `request.query` (when known), then its terminal event."""
    events: list[Event] = [terminal]
    if question is not None:
        events.insert(0, RequestQuery(message=question, agent_key=run.agent_key))
    ids = (run.run_id, run.chat_id, run.request_id)
    return [Envelope(e, seq, at_ms, *ids).wire() for seq, e in enumerate(events, start=1)]


_UNFOLDED = {
    "content.snapshot": ("content", "contentId", "delta", "text"),
    "reasoning.snapshot": ("reasoning", "reasoningId", "delta", "text"),
    "tool.snapshot": ("tool", "toolId", "args", "args"),
    "action.snapshot": ("action", "actionId", "args", "args"),
}
_NAMES = {"tool": ("toolName", "toolType"), "action": ("actionName",)}


def unfolded(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A replay entry as the native events it folds (a snapshot: its start, its text or arguments in one
    delta, its end; each with the entry's seq), for an encoder that takes native events."""
    shape = _UNFOLDED.get(str(entry.get("type")))
    if shape is None:
        return [entry]
    family, key, phase, body = shape
    head = {"seq": entry["seq"], "timestamp": entry["timestamp"], "runId": entry["runId"], key: entry[key]}
    start = {**head, "type": f"{family}.start", **{name: entry[name] for name in _NAMES.get(family, ())}}
    events = [start]
    if entry.get(body):
        piece = {"delta": entry[body], **({"chunkIndex": 0} if phase == "args" else {})}
        events.append({**head, "type": f"{family}.{phase}", **piece})
    return [*events, {**head, "type": f"{family}.end"}]
