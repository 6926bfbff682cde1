"""A Responses stream resumed on any instance: the run's native log (runtime/resume.py) encoded again.

The encoder is deterministic given how it started (`StreamState`, saved with the Response: its first
Response object, the client's tools, the server label, the tools whose calls it holds while they may await
approval and the calls the request decided, and for a background response the conversation learnt before
`response.in_progress`) and the run's events, which carry their own times: encoding the logged events
again gives the very events the live stream sent, with the same `sequence_number`s, and the stream resumes
after `starting_after`. A queued background response is waited for until its run starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.models import RunPointer
from agent_core.runtime.envelope import Envelope, envelope_from_wire
from agent_core.runtime.resume import POLL_GROWTH, POLL_MAX_S, POLL_START_S, ResumeBroken, log_events
from agent_core.store.responses import ResponseRecord, ResponseStore
from agent_core.wires.encoder import encoded
from agent_core.wires.responses.encoder import ResponsesEncoder

Wire = dict[str, Any]
RESUME_BROKEN = "the response's event log is incomplete: the stream cannot continue (GET /v1/responses/{id})"


@dataclass(frozen=True)
class StreamState:
    """How a Response's stream was encoded: enough to encode it again from the run's events."""

    response: Wire  # the Response object the encoder started from
    client_tools: list[str] = field(default_factory=list)
    server_label: str = "agent"
    conversation: Wire | None = None  # set between `response.created` and `response.in_progress` (background)
    gated: list[str] = field(default_factory=list)  # tools whose calls may be handed over for approval
    approved: dict[str, str] = field(default_factory=dict)  # decided calls -> their approval request ids

    def dump(self) -> Wire:
        out: Wire = {"response": self.response, "clientTools": self.client_tools, "serverLabel": self.server_label}
        if self.conversation is not None:
            out["conversation"] = self.conversation
        if self.gated:
            out["gated"] = self.gated
        if self.approved:
            out["approved"] = self.approved
        return out

    @staticmethod
    def load(data: Wire) -> StreamState:
        return StreamState(
            response=data["response"],
            client_tools=list(data.get("clientTools", [])),
            server_label=str(data.get("serverLabel", "agent")),
            conversation=data.get("conversation"),
            gated=list(data.get("gated", [])),
            approved=dict(data.get("approved", {})),
        )

    def encoder(self) -> ResponsesEncoder:
        return ResponsesEncoder(
            self.response,
            client_tools=frozenset(self.client_tools),
            server_label=self.server_label,
            gated=frozenset(self.gated),
            approved=self.approved,
        )

    def opening(self, encoder: ResponsesEncoder) -> list[Wire]:
        """`response.created`, then `response.in_progress`, as the live stream sent them."""
        frames = encoder.created()
        if self.conversation is not None:
            encoder.aggregator.update(conversation=self.conversation)
        return frames + encoder.in_progress()


async def resumed_frames(
    deps: RunDeps, responses: ResponseStore, record: ResponseRecord, after: int
) -> AsyncGenerator[Wire, None] | None:
    """The response's events after sequence number `after`, from its run's log and then live; None when the log
    cannot serve them (no state saved, or a finished run whose log is gone): the stored Response replays."""
    record = await _started(responses, record)
    if record.stream is None or record.run_id is None or record.chat_id is None:
        return None
    pointer = RunPointer(run_id=record.run_id, chat_id=record.chat_id, user_id=record.user_id)
    events = await log_events(deps, pointer, 0)
    if events is None:
        return None
    return _frames(StreamState.load(record.stream), events, after)


async def _started(responses: ResponseStore, record: ResponseRecord) -> ResponseRecord:
    """A queued background response once its run has started (or it ended without one)."""
    delay = POLL_START_S
    while record.status == "queued":
        await asyncio.sleep(delay)
        delay = min(delay * POLL_GROWTH, POLL_MAX_S)
        later = await responses.load(record.response_id)
        if later is None:
            return record
        record = later
    return record


async def _frames(state: StreamState, events: AsyncGenerator[Wire, None], after: int) -> AsyncGenerator[Wire, None]:
    encoder = state.encoder()

    async def envelopes() -> AsyncGenerator[Envelope, None]:
        async with contextlib.aclosing(events) as source:
            async for wire in source:
                yield envelope_from_wire(wire)

    try:
        for frame in state.opening(encoder):
            if frame["sequence_number"] > after:
                yield frame
        async with contextlib.aclosing(encoded(encoder, envelopes())) as frames:
            async for frame in frames:
                if frame["sequence_number"] > after:
                    yield frame
    except ResumeBroken:
        yield {"type": "error", "code": "resume_unavailable", "message": RESUME_BROKEN, "param": None}
