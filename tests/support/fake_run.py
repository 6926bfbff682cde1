"""A fake `AgentRun`: a scripted model and scripted tool results, no runner, store, lease or stream.

With it a strategy is tested alone: run it (`collect`) and assert the events it yields and the next step it
ends with. Model steps play `fake_llm.Reply` objects in order (an exhausted script fails the test: a
strategy that calls the model more than expected is a defect); each request is recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from agent_core.domain.events import (
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.memory.history_records import Recall
from agent_core.memory.time_query import TimeRange
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.next_step import STEP_TYPES, NextStep, Strategy
from agent_core.runtime.run_protocol import AgentRun, OnResult, Purpose
from agent_core.runtime.toolset import Toolset
from agent_core.tools.builtin.time import TimeTool
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolExecution, ToolService
from tests.support.fake_llm import Reply
from tests.support.fixtures import make_settings

T = TypeVar("T")


@dataclass
class ModelRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    forward_content: bool
    purpose: Purpose


class FakeStep:
    """One scripted model step: content events (if forwarded), tool events (if tools were offered)."""

    def __init__(self, reply: Reply, block: int, *, offered: bool, forward: bool, lead: str) -> None:
        self.reply, self.block, self.offered, self.forward, self.lead = reply, block, offered, forward, lead
        self._calls = [ToolCall(id=i, name=n, arguments=json.dumps(a)) for i, n, a in reply.tool_calls]

    async def __aiter__(self) -> AsyncIterator[Event]:
        if self.reply.error is not None:
            raise self.reply.error
        if self.forward and self.reply.text:
            content_id = f"m_{self.block}"
            yield ContentStart(content_id=content_id)
            yield ContentDelta(content_id=content_id, delta=self.lead + self.reply.text)
            yield ContentEnd(content_id=content_id)
        if self.offered:
            for call in self._calls:
                yield ToolStart(tool_id=call.id, tool_name=call.name, tool_type="backend")
                yield ToolArgs(tool_id=call.id, delta=call.arguments, chunk_index=0)

    def text(self) -> str:
        return self.reply.text

    def tool_calls(self) -> list[ToolCall]:
        return list(self._calls)

    def end_calls(self) -> list[tuple[ToolCall, Event]]:
        return [(call, ToolEnd(tool_id=call.id)) for call in self._calls]


def time_toolset(agent: AgentDefinition) -> Toolset:
    """The agent's toolset over a registry holding the `time` built-in (the tool the scripts call)."""
    registry = ToolRegistry([TimeTool()])
    service = ToolService(registry, make_settings()).scoped(registry, set(agent.tool_names))
    return Toolset(registry, service, list(agent.tool_names))


@dataclass
class FakeRun:
    """An `AgentRun` over a script: `replies` for model steps, `results` (by tool name) for tool calls."""

    agent: AgentDefinition
    replies: list[Reply]
    results: dict[str, str] = field(default_factory=dict)
    message: str = "what time is it?"
    client_tools: frozenset[str] = frozenset()
    continuation: bool = False
    timezone: str = "UTC"
    now: datetime = datetime(2026, 11, 26, 12, tzinfo=UTC)
    requests: list[ModelRequest] = field(default_factory=list)
    saved: list[dict[str, Any]] = field(default_factory=list)  # messages the run added (calls and results)
    executed: list[ToolCall] = field(default_factory=list)
    toolset: Toolset = field(init=False)
    _blocks: int = 0

    def __post_init__(self) -> None:
        self.toolset = time_toolset(self.agent)

    def window(self, system_prompt: str | None = None, *, include_run: bool = True) -> list[dict[str, Any]]:
        base = [
            {"role": "system", "content": system_prompt or self.agent.system_prompt},
            {"role": "user", "content": self.message},
        ]
        return base + (list(self.saved) if include_run else [])

    async def recall(self, span: TimeRange, *, detail: bool) -> Recall:
        return Recall()

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        return await awaitable

    def check_cancelled(self) -> None:
        return None

    def model_step(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        forward_content: bool = True,
        purpose: Purpose = "chat",
        lead: str = "",
    ) -> FakeStep:
        assert self.replies, f"the strategy called the model once more than scripted ({len(self.requests)} calls)"
        self.requests.append(ModelRequest(list(messages), list(tools or []), forward_content, purpose))
        self._blocks += 1
        return FakeStep(self.replies.pop(0), self._blocks, offered=bool(tools), forward=forward_content, lead=lead)

    async def text_block(self, text: str) -> AsyncIterator[Event]:
        self._blocks += 1
        yield ContentStart(content_id=f"m_{self._blocks}")
        yield ContentDelta(content_id=f"m_{self._blocks}", delta=text)
        yield ContentEnd(content_id=f"m_{self._blocks}")

    async def announce(self, calls: list[ToolCall]) -> AsyncIterator[Event]:
        for call in calls:
            yield ToolStart(tool_id=call.id, tool_name=call.name, tool_type="backend")
            yield ToolArgs(tool_id=call.id, delta=call.arguments, chunk_index=0)

    def end_event(self, call: ToolCall) -> Event:
        return ToolEnd(tool_id=call.id)

    async def end_calls(self, ends: list[tuple[ToolCall, Event]], *, handed: bool = False) -> AsyncIterator[Event]:
        for _, end in ends:
            yield end

    async def run_calls(
        self, calls: list[ToolCall], *, content: str = "", on_result: OnResult | None = None
    ) -> AsyncIterator[Event]:
        wire = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        self.saved.append({"role": "assistant", "content": content, "tool_calls": wire})
        for call in calls:
            self.executed.append(call)
            output = self.results.get(call.name, "ok")
            yield ToolResult(tool_id=call.id, result=output, status="ok", reason=None)
            self.saved.append({"role": "tool", "tool_call_id": call.id, "content": output})
            if on_result is not None:
                async for event in on_result(ToolExecution(call=call, status=ToolStatus.OK, output=output)):
                    yield event

    def hands_over(self, call: ToolCall) -> bool:
        return call.name in self.client_tools

    async def run_decided(self) -> AsyncIterator[Event]:
        for event in ():
            yield event

    def result_of(self, call_id: str) -> str:
        found = [m["content"] for m in self.saved if m.get("tool_call_id") == call_id]
        return found[-1] if found else ""

    def calls_made(self) -> list[ToolCall]:
        wire = [c for m in self.saved for c in m.get("tool_calls") or []]
        return [ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"]) for c in wire]


async def collect(strategy: Strategy, r: FakeRun) -> tuple[list[Event], NextStep]:
    """The events a strategy yields and the one step it ends with (asserted last and single)."""
    items = [item async for item in strategy(r)]
    steps = [i for i, item in enumerate(items) if isinstance(item, STEP_TYPES)]
    assert steps == [len(items) - 1], f"one step, last: {items}"
    step = items[-1]
    assert isinstance(step, STEP_TYPES)
    return [item for item in items[:-1] if not isinstance(item, STEP_TYPES)], step


def as_agent_run(r: FakeRun) -> AgentRun:
    """The fake is an `AgentRun` (mypy checks the protocol here)."""
    return r
