"""The shared encoder base (wires/encoder.py): a call still open when the run ends is closed exactly once, on
each of the five wires, whether the run ends with run.error, with run.cancel, or its consumer goes away.

Each wire is fed the same events: a call started (its arguments cut off, or ended and awaiting its result),
then the run's end, then a second `close()` as a stream's end gives it. The base's `close_call` hook must run
once per open call, and each wire's own closing frame must appear once (Chat Completions has none: its
terminal chunk ends the stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

from agent_core.domain.events import Event, RunCancel, RunError, ToolArgs, ToolEnd, ToolStart
from agent_core.runtime.envelope import Envelope
from agent_core.wires.ag_ui import AgUiEncoder
from agent_core.wires.chat_completions.encoder import ChatCompletionsEncoder
from agent_core.wires.encoder import OpenCall, Terminal, WireEncoderBase, encoded
from agent_core.wires.native import NativeEncoder
from agent_core.wires.responses.aggregate import response_object
from agent_core.wires.responses.encoder import ResponsesEncoder
from agent_core.wires.responses.request import ResponseCreate
from agent_core.wires.ui_stream import UiStreamEncoder

CALL = "call_1"
TOOL = "lookup"  # declared by the client on every wire that has client tools


def _responses() -> ResponsesEncoder:
    body = ResponseCreate(input="hi", tools=[{"type": "function", "name": TOOL}])
    skeleton = response_object(
        body, response_id="resp_1", created_at=1, model="agent", status="in_progress", conversation_id=None
    )
    return ResponsesEncoder(skeleton, client_tools=frozenset({TOOL}))


WIRES: dict[str, Callable[[], WireEncoderBase[Any]]] = {
    "native": lambda: NativeEncoder("run_1", "chat_1", "req_1"),
    "responses": _responses,
    "chat_completions": lambda: ChatCompletionsEncoder(
        "chatcmpl-1", created=1, model="agent", client_tools=frozenset({TOOL}), include_usage=False
    ),
    "ag_ui": lambda: AgUiEncoder("thread_1", "run_1", client_tools=frozenset({TOOL})),
    "ui_stream": lambda: UiStreamEncoder("msg_1", client_tools=frozenset({TOOL})),
}


def _field(frame: Any, name: str) -> Any:
    return frame.get(name) if isinstance(frame, dict) else getattr(frame, name, None)


def _closes_the_call(wire: str, frame: Any) -> bool:
    """The frame by which `wire` closes the call (Chat Completions has none)."""
    kind = _field(frame, "type")
    if wire == "native":
        return kind == "tool.end" and _field(frame, "toolId") == CALL
    if wire == "responses":
        return kind == "response.output_item.done" and frame["item"].get("call_id") == CALL
    if wire == "ag_ui":
        return str(kind) == "EventType.TOOL_CALL_END" and _field(frame, "tool_call_id") == CALL
    if wire == "ui_stream":
        return kind == "tool-input-error" and _field(frame, "toolCallId") == CALL
    return False


class Spy:
    """Counts the base's `close_call` on one encoder."""

    def __init__(self, encoder: WireEncoderBase[Any]) -> None:
        self.closed: list[tuple[str, str]] = []
        original = encoder.close_call

        def close_call(call: OpenCall, terminal: Terminal) -> list[Any]:
            self.closed.append((call.native_id, terminal.type))
            return original(call, terminal)

        encoder.close_call = close_call  # type: ignore[method-assign]


def _envelopes(events: list[Event]) -> list[Envelope]:
    return [Envelope(event, n, 1_700_000_000_000 + n, "run_1", "chat_1", "req_1") for n, event in enumerate(events, 1)]


CUT_OFF = [
    ToolStart(tool_id=CALL, tool_name=TOOL, tool_type="client"),
    ToolArgs(tool_id=CALL, delta='{"q', chunk_index=0),
]
ENDINGS = {"error": RunError(code="llm_unavailable", message="the model went away"), "cancel": RunCancel()}


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("wire", WIRES)
def test_a_call_cut_off_by_the_runs_end_is_closed_once(wire: str, ending: str) -> None:
    encoder = WIRES[wire]()
    spy = Spy(encoder)
    frames = list(encoder.opening())
    for envelope in _envelopes([*CUT_OFF, ENDINGS[ending]]):
        frames += encoder.encode(envelope)
    frames += encoder.close(RunCancel())  # a stream's end closes again: nothing more is closed
    frames += encoder.encode(ToolEnd(tool_id=CALL))  # nor does a late event reopen it
    assert spy.closed == [(CALL, ENDINGS[ending].type)]
    assert encoder.closed
    expected = 0 if wire == "chat_completions" else 1
    assert sum(_closes_the_call(wire, f) for f in frames) == expected
    if wire == "native":  # the added end is numbered in order, before the terminal event
        assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
        assert [f["type"] for f in frames[-2:]] == ["tool.end", ENDINGS[ending].type]


@pytest.mark.parametrize("wire", WIRES)
def test_a_run_that_stops_without_its_terminal_event_is_closed_as_cancelled_once(wire: str) -> None:
    encoder = WIRES[wire]()
    spy = Spy(encoder)
    frames = [f for e in _envelopes(CUT_OFF) for f in encoder.encode(e)]
    frames += encoder.close(RunCancel())
    frames += encoder.close(RunCancel())
    assert spy.closed == [(CALL, "run.cancel")]
    expected = 0 if wire == "chat_completions" else 1
    assert sum(_closes_the_call(wire, f) for f in frames) == expected


@pytest.mark.parametrize("wire", WIRES)
def test_a_call_awaiting_its_result_is_closed_once_too(wire: str) -> None:
    """A server call whose input ended but whose result never came is still open at the run's end."""
    encoder = WIRES[wire]()
    spy = Spy(encoder)
    started = [ToolStart(tool_id="t1", tool_name="time", tool_type="builtin"), ToolEnd(tool_id="t1")]
    frames = [f for e in _envelopes([*started, RunCancel()]) for f in encoder.encode(e)]
    frames += encoder.close(None)
    # Native and Chat Completions are done with a call at its end; the others await its result.
    assert spy.closed == ([] if wire in ("native", "chat_completions") else [("t1", "run.cancel")])
    if wire == "responses":  # the mcp_call item ends incomplete, once
        done = [f for f in frames if f["type"] == "response.output_item.done"]
        assert [d["item"]["status"] for d in done] == ["incomplete"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_consumer_that_leaves_mid_call_ends_the_encoder_once(wire: str) -> None:
    """`encoded` (the loop every streaming route uses): the consumer closes it at a frame of the call."""
    encoder = WIRES[wire]()
    spy = Spy(encoder)
    sent: list[Envelope] = []
    source_closed = []

    async def source() -> AsyncGenerator[Envelope, None]:
        try:
            for envelope in _envelopes([*CUT_OFF, ToolArgs(tool_id=CALL, delta='": 1}', chunk_index=1)]):
                sent.append(envelope)
                yield envelope
        finally:
            source_closed.append(True)

    async def consume() -> None:
        frames = encoded(encoder, source())
        async for _ in frames:
            if len(sent) == len(CUT_OFF):  # at the first frame of the call's arguments
                break
        await frames.aclose()

    asyncio.run(consume())
    assert source_closed == [True]
    assert encoder.closed
    assert spy.closed == [(CALL, "run.cancel")]


def test_the_stream_trailers() -> None:
    """`close(None)` after the terminal event: `[DONE]` for the UI stream and Chat Completions (not after an error
    chunk), nothing for the others."""
    trailers = {}
    for wire, make in WIRES.items():
        encoder = make()
        encoder.encode(RunError(code="x", message="y") if wire == "chat_completions" else RunCancel())
        trailers[wire] = encoder.close(None)
    assert trailers == {"native": [], "responses": [], "chat_completions": [], "ag_ui": [], "ui_stream": ["[DONE]"]}
