"""Every streaming route's response: sse-starlette's `EventSourceResponse`, built by `sse_response` alone.

The library frames each message (`event:` when named, then `data:`), sends a `: ping` comment after
`PING_INTERVAL_S` without a message (from a task of its own, so nothing waits behind it), sends each message
as soon as the route yields it, cancels the body when the client disconnects, and ends the response as a
disconnect when the client takes nothing for `SEND_TIMEOUT_S` (a stalled reader). A route answers
everything that has an HTTP status (400, 404, 409, 413, 422...) before it calls `sse_response`; once the
stream has started a failure is its terminal event, written by the protocol's encoder like any other.

Every message carries an `id:` line (`stream_frames`): the native seq, the Responses `sequence_number`, or
`{seq}.{index}` on the other wires, so a browser's EventSource reconnects with `Last-Event-ID` by itself.

Nothing runs after a Lambda response ends, so there the jobs a run queued are awaited before the last byte.
A stream of a turn holding its chat's lease (see runtime/pending.py) runs the turn in a task of its own
(`Detached`): a client that goes away (before the first byte, mid-stream, or stalled) stops receiving and
the run goes on to its end, which the response awaits however it ends, so the lease is released by the run
itself and nothing is left to its expiry. The events can be resumed from the run's log on any instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from agent_core.context import AppContext
from agent_core.domain.events import RunError
from agent_core.domain.ids import now_ms
from agent_core.errors import TooManyRequests
from agent_core.runtime.cancel import SERVER_STOPPING, CancelRegistry
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.pending import HeldTurn
from agent_core.wires.encoder import SseData, WireEncoder, identified

PING_INTERVAL_S = 15.0
# A client that takes no byte of a message (or ping) for this long has stalled: the response ends as if it
# had disconnected, so the run it drives does not sit at a yield holding its chat's lease.
SEND_TIMEOUT_S = 60.0
# When the server stops (Ctrl-C on `make run`), the runs of this process are cancelled (`run.cancel`
# reason `server_stopping`) and each stream has this long to send its terminal event before it is cut.
SHUTDOWN_GRACE_S = 5.0
LINE_END = "\n"
PING = ServerSentEvent(comment="ping", sep=LINE_END)  # `: ping\n\n`; clients skip comment lines
Messages = AsyncGenerator[ServerSentEvent, None]  # what a route streams
F = TypeVar("F")


def sse_message(
    data: Mapping[str, Any] | str, event: str | None = None, event_id: str | None = None
) -> ServerSentEvent:
    """One message: `id: <event_id>` when given, `event: <event>` when named, then `data: <data>` (a mapping as
    compact JSON, UTF-8)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return ServerSentEvent(text, event=event, id=event_id, sep=LINE_END)


class EventStream(EventSourceResponse):
    """The library's response, plus: its body closed and its turn (if any) settled however it ends."""

    def __init__(
        self,
        messages: AsyncIterator[ServerSentEvent],
        *,
        headers: Mapping[str, str] | None = None,
        turn: HeldTurn | None = None,
        cancels: CancelRegistry | None = None,
        ping_s: float = PING_INTERVAL_S,
        send_timeout_s: float = SEND_TIMEOUT_S,
    ) -> None:
        self.stopping = anyio.Event()  # set by the library when the server shuts down
        super().__init__(
            messages,
            headers=headers,
            ping=ping_s,
            sep=LINE_END,
            ping_message_factory=lambda: PING,
            send_timeout=send_timeout_s,
            shutdown_event=self.stopping,
            shutdown_grace_period=SHUTDOWN_GRACE_S,
        )
        self.turn = turn
        self.cancels = cancels
        self.detached: Detached[Any] | None = None  # the run's own task, when the stream follows one

    async def _cancel_runs_when_stopping(self) -> None:
        await self.stopping.wait()
        if self.cancels is not None:
            self.cancels.signal_all(SERVER_STOPPING)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stopper = asyncio.create_task(self._cancel_runs_when_stopping())
        try:
            await super().__call__(scope, receive, send)
        except OSError as error:
            # Sending failed because the client has gone (ASGI 2.4 servers such as uvicorn raise OSError) or
            # stalled (the library's SendTimeoutError is a TimeoutError): reported as Starlette's own
            # streaming response reports a client gone.
            raise ClientDisconnect() from error
        finally:
            stopper.cancel()
            # Shielded: a cancelled request does not interrupt the release.
            await asyncio.shield(self._settle())

    async def _settle(self) -> None:
        # A body left at a yield (sending failed) is closed now; a detached run goes on without it.
        close = getattr(self.body_iterator, "aclose", None)
        if close is not None:
            await close()
        if self.detached is not None:
            await self.detached.finished()  # the response ends with the run, never before (Lambda)
        if self.turn is not None:
            await self.turn.settle()


_END: Any = object()
_DETACHED: set[asyncio.Task[None]] = set()  # strong references: a detached run is not collected mid-run


class Detached(Generic[F]):
    """A run's frames produced by a task of its own, so the run does not depend on its client: a client that
    goes away stops receiving them, and the run goes on to its end (its answer stored, its lease released);
    cancelling stays explicit (POST /api/ap/cancel, a wire's stop). The response awaits `finished()`."""

    def __init__(self, frames: AsyncGenerator[F, None]) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._listening = True
        self.task = asyncio.create_task(self._pump(frames), name="detached-run")
        _DETACHED.add(self.task)
        self.task.add_done_callback(_DETACHED.discard)

    async def _pump(self, frames: AsyncGenerator[F, None]) -> None:
        try:
            async with contextlib.aclosing(frames) as source:
                async for frame in source:
                    if self._listening:
                        self._queue.put_nowait(frame)
        finally:
            self._queue.put_nowait(_END)

    async def frames(self) -> AsyncGenerator[F, None]:
        """The frames as the run makes them, until it ends (its failure raised here, as if it ran inline)."""
        try:
            while (frame := await self._queue.get()) is not _END:
                yield frame
        finally:
            self._listening = False
        await self.task

    async def finished(self) -> None:
        """Until the run has ended (a failure was already reported where it happened)."""
        with contextlib.suppress(Exception):
            await asyncio.shield(self.task)


async def join_detached() -> None:
    """Until every detached run of this process has ended (tests; a server stopping)."""
    while _DETACHED:
        await asyncio.wait(set(_DETACHED))


async def _then_drained(ctx: AppContext, messages: Messages) -> AsyncIterator[ServerSentEvent]:
    # One step for the library's disconnect listener before the run starts: a client already gone is
    # seen now, and the body is cancelled before its first event instead of at the run's first wait.
    await asyncio.sleep(0)
    async with contextlib.aclosing(messages) as source:
        async for message in source:
            yield message
    await ctx.before_response()


def sse_response(
    ctx: AppContext,
    messages: Messages,
    *,
    turn: HeldTurn | None = None,
    headers: Mapping[str, str] | None = None,
) -> EventStream:
    """The response streaming `messages` (see the module's docstring); `turn` when it holds a chat's lease."""
    return EventStream(_then_drained(ctx, messages), headers=headers, turn=turn, cancels=ctx.deps.cancels)


def stream_frames(
    ctx: AppContext,
    frames: AsyncGenerator[F, None],
    sse: Callable[[F], SseData],
    *,
    ids: Callable[[F], str | None] | None = None,
    turn: HeldTurn | None = None,
    headers: Mapping[str, str] | None = None,
) -> EventStream:
    """The one way a route streams a wire: each frame as the SSE message `sse` makes of it, with the `id:` line
    `ids` gives it (from which the wire's resume continues), else its number in the stream (1, 2, ...)."""

    detached = Detached(frames) if turn is not None else None
    source_frames = detached.frames() if detached is not None else frames

    async def messages() -> Messages:
        number = 0
        async with contextlib.aclosing(source_frames) as source:
            async for frame in source:
                number += 1
                data, event = sse(frame)
                yield sse_message(data, event, ids(frame) if ids is not None else str(number))

    response = sse_response(ctx, messages(), turn=turn, headers=headers)
    response.detached = detached
    return response


def stream_run(
    ctx: AppContext,
    encoder: WireEncoder[F],
    envelopes: AsyncIterator[Envelope],
    *,
    turn: HeldTurn | None = None,
    headers: Mapping[str, str] | None = None,
) -> EventStream:
    """A run's events through a wire's encoder (`wires.encoder.identified`), streamed with the encoder's ids."""
    frames = identified(encoder, envelopes)
    return stream_frames(
        ctx, frames, lambda frame: encoder.sse(frame.frame), ids=lambda frame: frame.id, turn=turn, headers=headers
    )


def refusal_event(refusal: TooManyRequests) -> RunError:
    """A budget's or the rate limit's 429 as a run's terminal error: its code, Retry-After and what remains."""
    data = refusal.data or {}
    return RunError(
        code=refusal.code,
        message=refusal.message,
        retry_after=refusal.retry_after_s,
        limit=data.get("limit"),
        remaining=data.get("remaining"),
    )


def stream_refusal(
    ctx: AppContext,
    encoder: WireEncoder[F],
    refusal: TooManyRequests,
    *,
    chat_id: str = "",
    request_id: str = "",
    headers: Mapping[str, str] | None = None,
) -> EventStream:
    """A turn a budget or the rate limit refused, on a wire whose clients show errors they read from the stream
    (native, AG-UI, the UI stream): 200, the wire's opening, then its terminal error, and `Retry-After` as a
    header too. Nothing of the turn was stored and no run exists: the native `run.error` has an empty runId."""

    async def refused() -> AsyncGenerator[Envelope, None]:
        yield Envelope(refusal_event(refusal), 1, now_ms(), "", chat_id, request_id)

    retry = {"Retry-After": str(refusal.retry_after_s)}
    return stream_run(ctx, encoder, refused(), headers={**(headers or {}), **retry})
