"""The hold-back window: a run's streamed answer (and reasoning) released only once the output guardrail has
checked it, so nothing it masks or blocks reaches any wire.

Every event the strategy yields passes through `Holdback.feed` before the recorder stamps it (loop.py), so the
native SSE, Responses, Chat Completions, AG-UI and UI-stream wires, the replay snapshot and the stored answer all
get the same checked text. A block's deltas gather in a buffer; once it holds more than the window
(AGENT_GUARDRAIL_HOLDBACK_CHARS) plus the adapter's batch, the buffer is scanned and everything but the last
window's worth is released (masked), never cutting a finding in two. The block's end (or any event of another
block) scans and releases the rest. A match up to the window's length split across deltas is therefore whole in
the buffer when it is scanned. A `block` finding anywhere in the buffer ends the run before any of it is sent.

With a tool-argument check, a call's `tool.args` are held until its `tool.end` and released as one checked
(masked) piece; the call then runs with those arguments (`arguments`).

What was masked is remembered: `redact` turns a text the strategy composed from raw blocks (its final answer,
the content saved with tool calls) into the text the client saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.domain.events import (
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolArgs,
    ToolEnd,
)
from agent_core.guardrails.findings import replacement
from agent_core.guardrails.guard import Guard

_Delta = ContentDelta | ReasoningDelta


@dataclass
class _Block:
    """One content or reasoning block: what the model wrote, what was released of it, and what waits."""

    block_id: str
    reasoning: bool
    raw: str = ""  # released part, as the model wrote it
    shown: str = ""  # released part, as sent
    pending: str = ""

    def delta(self, text: str) -> _Delta:
        if self.reasoning:
            return ReasoningDelta(reasoning_id=self.block_id, delta=text)
        return ContentDelta(content_id=self.block_id, delta=text)


@dataclass
class Holdback:
    """The output guard of one run (see the module's docstring)."""

    guard: Guard
    window: int
    blocks: dict[str, _Block] = field(default_factory=dict)
    masks: dict[str, str] = field(default_factory=dict)  # raw match -> its replacement
    arguments: dict[str, str] = field(default_factory=dict)  # tool id -> arguments as checked
    _open: _Block | None = None
    _args: dict[str, list[str]] = field(default_factory=dict)

    @property
    def checks_output(self) -> bool:
        return self.guard.checks("output")

    @property
    def checks_arguments(self) -> bool:
        return self.guard.checks("tool_arguments")

    async def feed(self, event: Event) -> list[Event]:
        """The events to send now in place of `event` (its held text may come later, in other deltas)."""
        if self.checks_output and isinstance(event, ContentDelta | ReasoningDelta):
            block_id = event.content_id if isinstance(event, ContentDelta) else event.reasoning_id
            out: list[Event] = []
            if self._open is not None and self._open.block_id != block_id:
                out += await self.flush()
            block = self.blocks.get(block_id)
            if block is None:
                block = self.blocks[block_id] = _Block(block_id, isinstance(event, ReasoningDelta))
            self._open = block
            block.pending += event.delta
            return out + await self._release(block, final=False)
        out = await self.flush()
        if self.checks_arguments and isinstance(event, ToolArgs):
            self._args.setdefault(event.tool_id, []).append(event.delta)
            return out
        if self.checks_arguments and isinstance(event, ToolEnd) and event.tool_id in self._args:
            raw = "".join(self._args.pop(event.tool_id))
            checked = await self.guard.screen("tool_arguments", raw)
            self.arguments[event.tool_id] = checked
            return [*out, ToolArgs(tool_id=event.tool_id, delta=checked, chunk_index=0), event]
        return [*out, event]

    async def flush(self) -> list[Event]:
        """Scan and release what the open block still holds (its end, or another block's event, came)."""
        block, self._open = self._open, None
        if block is None:
            return []
        return await self._release(block, final=True)

    async def _release(self, block: _Block, *, final: bool) -> list[Event]:
        pending = block.pending
        if not pending or (not final and len(pending) < self.window + self.guard.adapter.batch_chars):
            return []
        findings = await self.guard.scan("output", pending)  # raises when the check blocks
        cut = len(pending) if final else len(pending) - self.window
        moved = True
        while moved:  # never release part of a finding
            moved = False
            for finding in findings:
                if finding.start < cut < finding.end:
                    cut, moved = finding.start, True
        if cut <= 0:
            return []
        released = [f for f in findings if f.end <= cut]
        for finding in released:
            self.masks[pending[finding.start : finding.end]] = replacement(finding.label, self.guard.policy.mask_style)
        shown = self.guard.mask(pending[:cut], released)
        block.raw += pending[:cut]
        block.shown += shown
        block.pending = pending[cut:]
        return [block.delta(shown)] if shown else []

    def redact(self, text: str) -> str:
        """A text composed of this run's blocks, as the client saw it: each masked block's raw text replaced by
        what was sent, then any masked match left (a block cut short, e.g. by `rstrip`)."""
        for block in sorted(self.blocks.values(), key=lambda b: -len(b.raw)):
            if block.raw != block.shown and not block.reasoning and block.raw:
                text = text.replace(block.raw, block.shown)
        for raw in sorted(self.masks, key=len, reverse=True):
            text = text.replace(raw, self.masks[raw])
        return text

    def shown_of(self, raw: str) -> str:
        """What the client saw of a block that stopped part way (a cancel, the deadline): its released text."""
        for block in self.blocks.values():
            if not block.reasoning and raw and block.raw + block.pending == raw:
                return block.shown
        return self.redact(raw)
