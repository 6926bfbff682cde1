"""The event assembler: consecutive seq, ids on the right events, tool.end synthesised before an early result."""

from __future__ import annotations

from agent_core.domain.events import (
    ActionArgs,
    ActionResult,
    ActionStart,
    RequestQuery,
    RunComplete,
    RunError,
    ToolArgs,
    ToolResult,
    ToolStart,
)
from agent_core.domain.models import Usage
from agent_core.runtime.envelope import EventAssembler
from agent_core.runtime.replay import SnapshotBuilder


def _assembler() -> EventAssembler:
    ticks = iter(range(1000, 2000))
    return EventAssembler("run1", "c_1", "req1", clock=lambda: next(ticks))


def test_a_result_before_its_end_gets_the_end_first() -> None:
    a = _assembler()
    out = []
    for event in (
        RequestQuery(message="hi", agent_key="main-agent"),
        ToolStart(tool_id="t1", tool_name="time", tool_type="backend"),
        ToolArgs(tool_id="t1", delta="{}", chunk_index=0),
        ToolResult(tool_id="t1", result={"x": 1}, status="ok"),
        ActionStart(action_id="a1", action_name="highlight"),
        ActionArgs(action_id="a1", delta="{}", chunk_index=0),
        ActionResult(action_id="a1", result={}),
        RunComplete.of("stop", Usage()),
    ):
        out += [e.wire() for e in a.process(event)]
    assert [e["type"] for e in out] == [
        "request.query",
        "tool.start",
        "tool.args",
        "tool.end",
        "tool.result",
        "action.start",
        "action.args",
        "action.end",
        "action.result",
        "run.complete",
    ]
    assert [e["seq"] for e in out] == list(range(1, 11))
    assert out[0]["chatId"] == "c_1" and out[0]["requestId"] == "req1" and "chatId" not in out[1]
    assert out[-1]["chatId"] == "c_1" and "reason" not in out[4], "empty optional fields are omitted"


def test_calls_a_run_left_open_are_ended_before_its_terminal_event() -> None:
    # Given a run cut off while the model was still streaming a tool call and an action
    a = _assembler()
    out = []
    for event in (
        ToolStart(tool_id="t1", tool_name="time", tool_type="backend"),
        ToolArgs(tool_id="t1", delta='{"time', chunk_index=0),
        ActionStart(action_id="a1", action_name="highlight"),
        RunError(code="llm_unavailable", message="connection error"),
    ):
        out += [e.wire() for e in a.process(event)]
    # Then each call still gets its end, in start order, before run.error
    assert [(e["type"], e.get("toolId") or e.get("actionId")) for e in out[-3:]] == [
        ("tool.end", "t1"),
        ("action.end", "a1"),
        ("run.error", None),
    ]


def test_snapshot_closes_blocks_a_failed_run_left_open() -> None:
    a, snapshot = _assembler(), SnapshotBuilder()
    for event in (
        ToolStart(tool_id="t1", tool_name="time", tool_type="backend"),
        ToolArgs(tool_id="t1", delta='{"time', chunk_index=0),
    ):
        for envelope in a.process(event):
            snapshot.feed(envelope)
    entries = snapshot.entries()
    assert entries == [
        {
            "type": "tool.snapshot",
            "seq": 2,
            "timestamp": 1001,
            "runId": "run1",
            "toolId": "t1",
            "toolName": "time",
            "toolType": "backend",
            "args": '{"time',
        }
    ]
