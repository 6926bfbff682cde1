"""Every event the Responses encoder can emit, and every Response it folds them into, is valid for the openai SDK.

The encoder is driven through each of its paths (text and reasoning, a server tool that succeeds or is refused,
a client function call, the turn deadline, a failure and a cancellation with items still open, a stored
Response replayed); each event is validated against the `ResponseStreamEvent` member its `type` names and
each Response against `Response`, with pydantic `TypeAdapter`s (tests/support/openai_wire.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response
from pydantic import TypeAdapter

from agent_core.domain.events import (
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
from agent_core.wires.responses.aggregate import response_object
from agent_core.wires.responses.encoder import ResponsesEncoder, replay_events
from agent_core.wires.responses.request import ResponseCreate
from tests.support.openai_wire import unknown_fields, validate_response, validate_stream_event

USAGE = {"promptTokens": 11, "completionTokens": 7}


def _text(native: str, *deltas: str) -> list[Event]:
    return [
        ContentStart(content_id=native),
        *(ContentDelta(content_id=native, delta=d) for d in deltas),
        ContentEnd(content_id=native),
    ]


def _reasoning(native: str, text: str) -> list[Event]:
    return [
        ReasoningStart(reasoning_id=native),
        ReasoningDelta(reasoning_id=native, delta=text),
        ReasoningEnd(reasoning_id=native),
    ]


def _tool(native: str, name: str, args: str) -> list[Event]:
    return [
        ToolStart(tool_id=native, tool_name=name, tool_type="builtin"),
        ToolArgs(tool_id=native, delta=args, chunk_index=0),
        ToolEnd(tool_id=native),
    ]


RUNS: dict[str, list[Event]] = {
    "text_and_reasoning": [
        *_reasoning("r1", "Thinking."),
        *_text("c1", "Hello ", "world"),
        RunComplete(finish_reason="stop", usage=USAGE),
    ],
    "server_tool": [
        *_tool("t1", "time", '{"timezone": "Asia/Tokyo"}'),
        ToolResult(tool_id="t1", result={"time": "18:00"}, status="ok"),
        *_text("c1", "Evening."),
        RunComplete(finish_reason="stop", usage=USAGE),
    ],
    "refused_server_tool": [
        *_tool("t1", "http_get", '{"url": "http://169.254.169.254/"}'),
        ToolResult(tool_id="t1", result="blocked address", status="denied", reason="egress_blocked"),
        RunComplete(finish_reason="stop", usage=USAGE),
    ],
    "client_function_call": [
        *_tool("call_w", "get_weather", '{"city": "Paris"}'),
        RunComplete(finish_reason="tool_calls", usage=USAGE),
    ],
    "deadline": [
        ContentStart(content_id="c1"),
        ContentDelta(content_id="c1", delta="Part"),
        RunComplete(finish_reason="deadline", usage=USAGE),
    ],
    "failure_with_open_items": [
        ReasoningStart(reasoning_id="r1"),
        *_tool("call_w", "get_weather", '{"ci'),
        ToolStart(tool_id="t2", tool_name="time", tool_type="builtin"),
        RunError(code="llm_unavailable", message="the model could not be reached"),
    ],
    "approval_requested": [
        *_tool("t1", "write_note", '{"path": "a.txt"}'),
        ToolApproval(tool_id="t1", tool_name="write_note", args={"path": "a.txt"}, reason="always"),
        RunComplete(finish_reason="tool_calls", usage=USAGE),
    ],
    "gated_calls_that_ask_nobody": [
        ToolStart(tool_id="t1", tool_name="write_note", tool_type="builtin"),
        ToolArgs(tool_id="t1", delta='{"path": ', chunk_index=0),
        ToolStart(tool_id="t2", tool_name="time", tool_type="builtin"),
        ToolArgs(tool_id="t1", delta='"a.txt"}', chunk_index=1),
        ToolStart(tool_id="t3", tool_name="write_note", tool_type="builtin"),
        ToolEnd(tool_id="t1"),
        ToolEnd(tool_id="t2"),
        ToolEnd(tool_id="t3"),
        ToolResult(tool_id="t2", result={"time": "18:00"}, status="ok"),
        ToolResult(tool_id="t3", result={"written": "b.txt"}, status="ok"),
        ToolResult(tool_id="t1", result={"written": "a.txt"}, status="ok"),
        RunComplete(finish_reason="stop", usage=USAGE),
    ],
    "failure_with_a_held_call": [
        ToolStart(tool_id="t1", tool_name="write_note", tool_type="builtin"),
        ToolArgs(tool_id="t1", delta='{"pa', chunk_index=0),
        RunError(code="llm_unavailable", message="the model could not be reached"),
    ],
    "cancel_with_open_items": [
        ContentStart(content_id="c1"),
        ContentDelta(content_id="c1", delta="Half"),
        ToolStart(tool_id="call_w", tool_name="get_weather", tool_type="client"),
        RunCancel(reason="client"),
    ],
}


def _encoder(status: str = "in_progress") -> ResponsesEncoder:
    body = ResponseCreate(
        model="main-agent",
        input="hi",
        instructions="Be brief.",
        metadata={"ticket": "42"},
        tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
    )
    skeleton = response_object(
        body, response_id="resp_abc", created_at=1_700_000_000, model="main-agent", status=status,
        conversation_id="c_1",
    )  # fmt: skip
    client_tools, gated = frozenset({"get_weather"}), frozenset({"write_note"})
    return ResponsesEncoder(skeleton, client_tools=client_tools, server_label="main-agent", gated=gated)


def _stream(events: list[Event]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    encoder = _encoder()
    wire = [*encoder.created(), *encoder.in_progress()]
    for event in events:
        wire += encoder.encode(event)
    return wire, encoder.aggregator.snapshot()


@pytest.mark.parametrize("run", RUNS)
def test_every_streamed_event_and_the_response_validate(run: str) -> None:
    wire, response = _stream(RUNS[run])
    assert {e["type"] for e in wire} >= {"response.created", "response.in_progress"}
    assert [(e["type"], validate_stream_event(e)) for e in wire] == [(e["type"], []) for e in wire]
    assert validate_response(response) == []
    assert [e["sequence_number"] for e in wire] == list(range(len(wire)))
    # Items are added in output order (the SDK appends each added item and finds it by its output_index)
    added = [e["output_index"] for e in wire if e["type"] == "response.output_item.added"]
    assert added == list(range(len(added))) == list(range(len(response["output"])))


@pytest.mark.parametrize("run", RUNS)
def test_a_stored_response_replays_as_valid_events(run: str) -> None:
    _, response = _stream(RUNS[run])
    replayed = replay_events(response)
    assert [(e["type"], validate_stream_event(e)) for e in replayed] == [(e["type"], []) for e in replayed]


def test_the_paths_reach_every_kind_of_event_the_encoder_emits() -> None:
    """The runs above are not a sample: together they emit each event type the encoder has."""
    emitted = {e["type"] for run in RUNS.values() for e in _stream(run)[0]}
    assert emitted == {
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    }


def test_a_gated_call_is_held_until_its_end_says_what_it_is() -> None:
    # A call that awaits approval is only its mcp_approval_request
    wire, response = _stream(RUNS["approval_requested"])
    assert [o["type"] for o in response["output"]] == ["mcp_approval_request"]
    assert not [e for e in wire if e["type"].startswith("response.mcp_call")]
    # Calls that ask nobody are shown once the event after their end comes, in that order, with all their
    # arguments; a call not gated (t2) is shown as it starts
    wire, response = _stream(RUNS["gated_calls_that_ask_nobody"])
    shown = [e["item"].get("name") for e in wire if e["type"] == "response.output_item.added"]
    assert shown == ["time", "write_note", "write_note"]
    assert [(o["type"], o["status"]) for o in response["output"]] == [("mcp_call", "completed")] * 3
    assert response["output"][1]["arguments"] == '{"path": "a.txt"}'
    # as soon as any event follows their end (another held call's end too)
    encoder = _encoder()
    starts = [ToolStart(tool_id=n, tool_name="write_note", tool_type="builtin") for n in ("t1", "t2")]
    for event in [*starts, ToolArgs(tool_id="t1", delta="{}", chunk_index=0), ToolEnd(tool_id="t1")]:
        assert encoder.encode(event) == []
    shown = encoder.encode(ToolEnd(tool_id="t2"))
    assert [(e["type"], e.get("item", {}).get("name")) for e in shown][:2] == [
        ("response.output_item.added", "write_note"),
        ("response.mcp_call.in_progress", None),
    ]
    # A held call the run's end cuts off is shown, then closed incomplete
    wire, response = _stream(RUNS["failure_with_a_held_call"])
    assert [(o["type"], o["status"], o["arguments"]) for o in response["output"]] == [
        ("mcp_call", "incomplete", '{"pa')
    ]
    assert response["status"] == "failed"


def test_a_queued_response_validates() -> None:
    encoder = _encoder(status="queued")
    (created,) = encoder.created()
    assert validate_stream_event(created) == [] and created["response"]["status"] == "queued"


def test_the_check_finds_a_missing_field_a_wrong_value_and_an_unknown_field() -> None:
    wire, response = _stream(RUNS["text_and_reasoning"])
    delta = next(e for e in wire if e["type"] == "response.output_text.delta")
    assert validate_stream_event({k: v for k, v in delta.items() if k != "item_id"}) != []
    assert validate_stream_event({**delta, "type": "response.output_text.deltas"}) != []
    assert validate_response({**response, "status": "finished"}) != []
    parsed = TypeAdapter(Response).validate_python({**response, "colour": "blue"})
    assert unknown_fields(parsed) == [".colour"]
