"""What every wire shares: the `WireEncoder` protocol, its base (the calls left open closed once), and the loop.

An encoder turns the run's typed events into its wire's frames: `opening()` before the first event, `encode()`
per event, `close()` after the last. A terminal event (run.complete / run.error / run.cancel) ends the
encoder; `close(RunError | RunCancel)` ends it the same way when the run stopped without one (its consumer went
away, or it could not start), and `close(None)` after a terminal event gives the wire's trailer (`[DONE]`).

`WireEncoderBase` keeps the calls (tools and UI actions) each wire has open, from their start until the wire
says they are done, and closes every call still open exactly once when the encoder ends, in start order,
through the wire's `close_call`: the bookkeeping is the base's, the frames the wire's.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agent_core.domain.events import (
    ActionEnd,
    ActionStart,
    Event,
    RunCancel,
    RunComplete,
    RunError,
    ToolEnd,
    ToolStart,
)
from agent_core.runtime.envelope import Envelope

F = TypeVar("F")
Ending = RunError | RunCancel  # how a run that stopped without its terminal event is closed
Terminal = RunComplete | RunError | RunCancel
SseData = tuple[Mapping[str, Any] | str, str | None]  # one SSE message: its data and its event name (or none)


class WireEncoder(Protocol[F]):
    """One run's translation into a wire's frames."""

    @property
    def closed(self) -> bool: ...

    def opening(self) -> list[F]: ...

    def encode(self, event: Envelope | Event) -> list[F]: ...

    def close(self, ending: Ending | None = None) -> list[F]: ...

    def sse(self, frame: Any) -> SseData: ...

    def frame_id(self, frame: Any, seq: int, index: int) -> str: ...


@dataclass
class OpenCall:
    native_id: str
    name: str
    ended: bool = False  # its input is complete (tool.end / action.end seen); open until the wire is done with it


class OpenCalls:
    """The calls a wire has open, in start order."""

    def __init__(self) -> None:
        self._calls: dict[str, OpenCall] = {}

    def open(self, native_id: str, name: str) -> None:
        self._calls[native_id] = OpenCall(native_id, name)

    def get(self, native_id: str) -> OpenCall | None:
        return self._calls.get(native_id)

    def end(self, native_id: str) -> OpenCall | None:
        """The call's input is complete; None when the call is not open."""
        call = self._calls.get(native_id)
        if call is not None:
            call.ended = True
        return call

    def done(self, native_id: str) -> OpenCall | None:
        """The wire is done with the call: it is no longer open (None when it was not)."""
        return self._calls.pop(native_id, None)

    def drain(self) -> list[OpenCall]:
        """Every call still open, in start order; none is open afterwards."""
        calls, self._calls = list(self._calls.values()), {}
        return calls

    def __contains__(self, native_id: object) -> bool:
        return native_id in self._calls

    def __len__(self) -> int:
        return len(self._calls)


def native_event(event: Envelope | Event) -> Event:
    return event.event if isinstance(event, Envelope) else event


class WireEncoderBase(ABC, Generic[F]):
    """The shared half of an encoder: open calls tracked, terminal events and `close` routed through `_end`."""

    def __init__(self) -> None:
        self.calls = OpenCalls()
        self._ended = False

    @property
    def closed(self) -> bool:
        return self._ended

    def opening(self) -> list[F]:
        return []

    def encode(self, event: Envelope | Event) -> list[F]:
        """The frames for one event (none once the encoder has ended)."""
        if self._ended:
            return []
        native = native_event(event)
        match native:
            case RunComplete() | RunError() | RunCancel():
                return self._end(native, event)
            case ToolStart(tool_id=call_id, tool_name=name) | ActionStart(action_id=call_id, action_name=name):
                self.calls.open(call_id, name)
            case ToolEnd(tool_id=call_id) | ActionEnd(action_id=call_id):
                self.calls.end(call_id)
        return self.frames(native, event)

    def close(self, ending: Ending | None = None) -> list[F]:
        """After the run: its end when it stopped without a terminal event, then the wire's trailer."""
        frames = self._end(ending, ending) if ending is not None and not self._ended else []
        return frames + self.trailer()

    def _end(self, terminal: Terminal, event: Envelope | Event) -> list[F]:
        self._ended = True
        closing = self.ending(terminal)
        closing += self.close_open(self.calls.drain(), terminal)
        return self.terminal(terminal, closing, event)

    def ending(self, terminal: Terminal) -> list[F]:
        """Frames before the open calls are closed (the Responses `error` event)."""
        return []

    def close_open(self, calls: list[OpenCall], terminal: Terminal) -> list[F]:
        """The calls still open when the run ends, each closed once (a wire may interleave its other open items)."""
        frames: list[F] = []
        for call in calls:
            frames += self.close_call(call, terminal)
        return frames

    @abstractmethod
    def frames(self, event: Event, envelope: Envelope | Event) -> list[F]:
        """The wire's frames for a non-terminal event."""

    @abstractmethod
    def close_call(self, call: OpenCall, terminal: Terminal) -> list[F]:
        """The frames that close a call still open when the run ends (called once per call)."""

    @abstractmethod
    def terminal(self, terminal: Terminal, closing: list[F], envelope: Envelope | Event) -> list[F]:
        """The run's last frames after `closing` (`ending()`, then the open calls' closing frames)."""

    def trailer(self) -> list[F]:
        """Frames after the terminal ones (`[DONE]`)."""
        return []

    @abstractmethod
    def sse(self, frame: Any) -> SseData:
        """A frame as one SSE message."""

    def frame_id(self, frame: Any, seq: int, index: int) -> str:
        """A frame's SSE `id:`: `{seq}.{index}`, the native event that made it and its place among that event's
        frames (seq 0: the opening; the trailer counts on after the terminal event's)."""
        return f"{seq}.{index}"


async def encoded(encoder: WireEncoder[F], envelopes: AsyncIterator[Envelope]) -> AsyncGenerator[F, None]:
    """A run's frames: the opening, each event's, then the trailer; a consumer that leaves first (or a run that
    stops without its terminal event) ends the encoder as cancelled, so no call is left open in its state."""
    try:
        for frame in encoder.opening():
            yield frame
        try:
            async for envelope in envelopes:
                for frame in encoder.encode(envelope):
                    yield frame
        finally:  # the run ends with its consumer (a generator left at a yield is closed now)
            close = getattr(envelopes, "aclose", None)
            if close is not None:
                await close()
        for frame in encoder.close(None if encoder.closed else RunCancel()):
            yield frame
    finally:
        if not encoder.closed:
            encoder.close(RunCancel())


@dataclass(frozen=True)
class Identified(Generic[F]):
    """A frame and its SSE id (`WireEncoder.frame_id`)."""

    frame: F
    id: str


async def identified(
    encoder: WireEncoder[F], envelopes: AsyncIterator[Envelope]
) -> AsyncGenerator[Identified[F], None]:
    """`encoded`, each frame with its id: the seq of the native event it came from and its index among them."""
    seq = 0

    async def tracked() -> AsyncGenerator[Envelope, None]:
        nonlocal seq
        try:
            async for envelope in envelopes:
                seq = envelope.seq
                yield envelope
        finally:
            close = getattr(envelopes, "aclose", None)
            if close is not None:
                await close()

    index, at = 0, 0
    async with contextlib.aclosing(encoded(encoder, tracked())) as frames:
        async for frame in frames:
            if seq != at:
                index, at = 0, seq
            yield Identified(frame, encoder.frame_id(frame, seq, index))
            index += 1


def frame_position(frame_id: str) -> tuple[int, int]:
    """`{seq}.{index}` (or a bare seq) as a comparable position; (-1, -1) for an id that is neither."""
    seq, _, index = frame_id.partition(".")
    try:
        return int(seq), int(index or 0)
    except ValueError:
        return -1, -1


async def reencoded(
    encoder: WireEncoder[F], envelopes: AsyncIterator[Envelope], after_id: str | None = None
) -> AsyncGenerator[Identified[F], None]:
    """A run's frames encoded again from its logged envelopes (the encoder as fresh as the live one was),
    those up to and including `after_id` (a frame id the client received: `Last-Event-ID`) left out. The
    encoders are deterministic, so the frames after it are the live stream's (how a wire resumes)."""
    after = frame_position(after_id) if after_id is not None else (-1, -1)
    async with contextlib.aclosing(identified(encoder, envelopes)) as frames:
        async for frame in frames:
            if frame_position(frame.id) > after:
                yield frame
