"""A UI wire's stream resumed on any instance: the Vercel AI SDK UI message stream and AG-UI.

The live stream gives each frame the SSE id `{seq}.{index}`: the native event that made it and its place among
that event's frames (`wires/encoder.py`, `identified`). An encoder made as the live one was, fed the run's
native events from its durable log from the first (`runtime/resume.py`, then the live run's until its terminal
event), makes the very same frames with the very same ids; those up to the client's `Last-Event-ID` are left
out, so the client gets exactly what the uncut stream would have sent from there (without one: the whole
stream, from its opening frame). A log that stops short of the run's end (a batch never written) ends the
stream with the wire's own error frames (`run.error` `resume_unavailable`), never a cut connection.

The client's tools are not stored: on these wires every frontend tool of a run is one the client declared (the
agent's browser tools are dropped for a client's request: `wires/client_tools.request_agent`), so the encoder
learns them from the `tool.start` events as they come, before it encodes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any, Protocol, TypeVar

from agent_core.container import RunDeps
from agent_core.domain.events import RunError, ToolStart
from agent_core.domain.ids import now_ms
from agent_core.domain.models import Chat, Run, RunPointer, RunStatus
from agent_core.errors import InvalidRequest, ResumeUnavailable
from agent_core.observability import logger
from agent_core.runtime.envelope import Envelope, envelope_from_wire
from agent_core.runtime.replay import unfolded
from agent_core.runtime.resume import ResumeBroken, log_events, stored_replay
from agent_core.wires.encoder import Identified, WireEncoder, identified

F = TypeVar("F")
Wire = dict[str, Any]
FrameId = tuple[int, int]
LOG_BROKEN = "the run's event log is incomplete: the stream cannot continue (the chat's history shows the run)"


class ClientToolsEncoder(WireEncoder[F], Protocol[F]):
    """A UI wire's encoder: it knows the client's tools by name."""

    client_tools: frozenset[str]


def _parsed(value: str) -> FrameId | None:
    seq, dot, index = value.strip().partition(".")
    return (int(seq), int(index)) if dot and seq.isdigit() and index.isdigit() else None


def frame_id(value: str | None) -> FrameId | None:
    """A client's `Last-Event-ID` (`{seq}.{index}`) as a comparable pair; None when absent; 422 when not one."""
    if value is None:
        return None
    parsed = _parsed(value)
    if parsed is None:
        message = "Last-Event-ID must be the id of an event of this stream ({seq}.{index})"
        raise InvalidRequest(message, param="Last-Event-ID")
    return parsed


async def active_run(deps: RunDeps, chat: Chat) -> Run | None:
    """The chat's run that is going on: the holder of its lease, while the lease lives and the run is running."""
    if not chat.active_run_id or (chat.lease_expires_at or 0) <= now_ms():  # leases run on the wall clock
        return None
    run = await deps.turns.get_run(chat.chat_id, chat.active_run_id)
    return run if run is not None and run.status == RunStatus.RUNNING else None


async def run_log_events(deps: RunDeps, run: Run) -> AsyncGenerator[Wire, None]:
    """The run's native events from its first (logged, then live); 410 when its log cannot serve them."""
    pointer = RunPointer(run_id=run.run_id, chat_id=run.chat_id, user_id=run.user_id)
    events = await log_events(deps, pointer, 0)
    if events is None:
        raise ResumeUnavailable("the run's event log cannot continue this stream", param="Last-Event-ID")
    return events


async def ended_run_events(deps: RunDeps, run: Run, *, from_start: bool) -> AsyncGenerator[Wire, None] | None:
    """A run's native events from its first, for a client that asks again for a run no longer going on: its log
    (then live, should it still be going on), else, `from_start`, its stored replay (410 when it has none);
    None when the log cannot serve them and the client has some already."""
    pointer = RunPointer(run_id=run.run_id, chat_id=run.chat_id, user_id=run.user_id)
    events = await log_events(deps, pointer, 0)
    if events is None and from_start:
        return _native(stored_replay(deps, run))
    return events


async def _native(entries: AsyncGenerator[Wire, None]) -> AsyncGenerator[Wire, None]:
    """A stored replay's entries as native events (its snapshots unfolded)."""
    async with contextlib.aclosing(entries) as source:
        async for entry in source:
            for event in unfolded(entry):
                yield event


async def resumed_frames(
    encoder: ClientToolsEncoder[F], run: Run, events: AsyncGenerator[Wire, None], after: FrameId | None
) -> AsyncGenerator[Identified[F], None]:
    """The wire's frames (with their ids) of the run's events, those up to `after` left out."""

    async def envelopes() -> AsyncGenerator[Envelope, None]:
        last = 0
        try:
            async with contextlib.aclosing(events) as source:
                async for wire in source:
                    envelope = envelope_from_wire(wire)
                    event = envelope.event
                    if isinstance(event, ToolStart) and event.tool_type == "frontend":
                        encoder.client_tools = encoder.client_tools | {event.tool_name}
                    last = envelope.seq
                    yield envelope
        except ResumeBroken as broken:
            logger.warning("a resumed stream cannot continue", extra={"runId": run.run_id, "reason": str(broken)})
            end = RunError(code=ResumeUnavailable.code, message=LOG_BROKEN)
            yield Envelope(end, last + 1, now_ms(), run.run_id, run.chat_id, run.request_id)

    async with contextlib.aclosing(identified(encoder, envelopes())) as frames:
        async for frame in frames:
            if after is None or (_parsed(frame.id) or (0, 0)) > after:
                yield frame
