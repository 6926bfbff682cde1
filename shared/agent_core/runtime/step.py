"""One model step: stream the LLM, turn each delta into events at once, and collect the tool calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agent_core.domain.events import (
    ActionArgs,
    ActionEnd,
    ActionStart,
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ToolArgs,
    ToolEnd,
    ToolStart,
)
from agent_core.domain.models import ToolCall, Usage
from agent_core.llm.base import LlmDelta, ToolCallFragment


@dataclass
class _PendingCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    chunks: int = 0
    ended: bool = False


@dataclass
class StepAssembler:
    """Stateful translation of deltas for one step; ids are unique within the run."""

    step: int
    tool_type: dict[str, str]
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    lead: str = ""  # streamed before the first content (a separator between answer parts)
    _content_open: bool = False
    _reasoning_open: bool = False

    @property
    def content_id(self) -> str:
        return f"m_{self.step}"

    @property
    def reasoning_id(self) -> str:
        return f"r_{self.step}"

    def feed(self, delta: LlmDelta) -> list[Event]:
        events: list[Event] = []
        if delta.reasoning:
            if not self._reasoning_open:
                self._reasoning_open = True
                events.append(ReasoningStart(reasoning_id=self.reasoning_id))
            self.reasoning.append(delta.reasoning)
            events.append(ReasoningDelta(reasoning_id=self.reasoning_id, delta=delta.reasoning))
        if delta.content:
            events += self._close_reasoning()
            if not self._content_open:
                self._content_open = True
                events.append(ContentStart(content_id=self.content_id))
                if self.lead and not self.content and not delta.content[:1].isspace():
                    self.content.append(self.lead)
                    events.append(ContentDelta(content_id=self.content_id, delta=self.lead))
            self.content.append(delta.content)
            events.append(ContentDelta(content_id=self.content_id, delta=delta.content))
        for fragment in delta.tool_calls:
            events += self._fragment(fragment)
        if delta.finish_reason:
            self.finish_reason = delta.finish_reason
        if delta.usage:
            self.usage = delta.usage
        return events

    def _fragment(self, fragment: ToolCallFragment) -> list[Event]:
        events: list[Event] = []
        call = self.calls.get(fragment.index)
        if call is None:
            call_id = fragment.id or f"call_{self.step}_{fragment.index}"
            call = _PendingCall(id=call_id, name=fragment.name or "")
            self.calls[fragment.index] = call
            kind = self.kind(call.name)
            if kind == "action":
                events.append(ActionStart(action_id=call.id, action_name=call.name))
            else:
                events.append(ToolStart(tool_id=call.id, tool_name=call.name, tool_type=kind))
        elif fragment.name and not call.name:
            call.name = fragment.name
        if fragment.arguments:
            call.arguments.append(fragment.arguments)
            if self.kind(call.name) == "action":
                events.append(ActionArgs(action_id=call.id, delta=fragment.arguments, chunk_index=call.chunks))
            else:
                events.append(ToolArgs(tool_id=call.id, delta=fragment.arguments, chunk_index=call.chunks))
            call.chunks += 1
        return events

    def kind(self, tool_name: str) -> str:
        """backend / mcp / frontend / action; unknown names are reported as backend."""
        return self.tool_type.get(tool_name, "backend")

    def _close_reasoning(self) -> list[Event]:
        if not self._reasoning_open:
            return []
        self._reasoning_open = False
        return [ReasoningEnd(reasoning_id=self.reasoning_id)]

    def finish(self) -> list[Event]:
        """Close the open reasoning and content blocks (calls are ended by `end_calls`)."""
        events = self._close_reasoning()
        if self._content_open:
            self._content_open = False
            events.append(ContentEnd(content_id=self.content_id))
        return events

    def end_calls(self) -> list[tuple[ToolCall, Event]]:
        """Each call not yet ended with its end event, in index order (the caller may act before each)."""
        ends: list[tuple[ToolCall, Event]] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if call.ended:
                continue
            call.ended = True
            end: Event = ActionEnd(action_id=call.id) if self.kind(call.name) == "action" else ToolEnd(tool_id=call.id)
            ends.append((ToolCall(id=call.id, name=call.name, arguments="".join(call.arguments)), end))
        return ends

    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments)) for _, c in sorted(self.calls.items())]

    def text(self) -> str:
        return "".join(self.content)


class StreamedStep:
    """One model call as a strategy sees it: iterate it for the events; then it tells what the model produced."""

    def __init__(self, assembler: StepAssembler, events: AsyncIterator[Event]) -> None:
        self._assembler = assembler
        self._events = events

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    def text(self) -> str:
        return self._assembler.text()

    def tool_calls(self) -> list[ToolCall]:
        return self._assembler.tool_calls()

    def end_calls(self) -> list[tuple[ToolCall, Event]]:
        return self._assembler.end_calls()
