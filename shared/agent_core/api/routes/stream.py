"""The streaming routes (stream function): POST /api/ap/query (SSE), GET /api/ap/runs/{runId}/events (resume)
and POST /api/ap/cancel."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from pydantic import Field

from agent_core.api.deps import app_context, current_user, link_base, request_now, request_timezone
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.schemas import ChatId, PathId, RequestBody
from agent_core.api.sse import EventStream, stream_frames, stream_refusal, stream_run
from agent_core.context import AppContext
from agent_core.domain.models import TurnResult
from agent_core.errors import InvalidRequest, NotFound, ResumeUnavailable, TooManyRequests
from agent_core.observability import logger
from agent_core.runtime.pending import PendingTurn
from agent_core.runtime.resume import ResumeBroken, open_resume
from agent_core.runtime.turn import TurnRequest, prepare_turn
from agent_core.wires.native import NativeEncoder, native_id, native_sse

router = APIRouter(prefix="/api/ap", tags=["stream"], responses=error_responses(401, 413, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


class QueryIn(RequestBody):
    message: str
    chat_id: ChatId | None = None
    agent_key: str | None = Field(None, max_length=64)
    request_id: str | None = Field(None, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")
    timezone: str | None = None  # IANA name; this request's zone instead of the profile's


class CancelIn(RequestBody):
    run_id: str = Field(min_length=1, max_length=64)


def _replayed(ctx: AppContext, result: TurnResult) -> AsyncGenerator[dict[str, Any], None]:
    """A retried request that already completed: its run again, from the stored replay snapshot."""

    async def events() -> AsyncGenerator[dict[str, Any], None]:
        run = None
        if result.chat_id and result.run_id:
            run = await ctx.deps.turns.get_run(result.chat_id, result.run_id)
        snapshot = (run.snapshot if run is not None else None) or []
        snapshot = ctx.deps.data_links.refresh(snapshot, result.chat_id or "")  # its links signed afresh
        for entry in snapshot:
            yield entry
        if not snapshot:
            yield {"type": "run.complete", "requestId": result.request_id, "finishReason": result.finish_reason}

    return events()


@router.post("/query", response_class=EventStreamResponse, responses=error_responses(400, 404, 409, 503))
async def query(
    body: QueryIn,
    request: Request,
    ctx: Ctx,
    user: User,
    x_request_id: Annotated[str | None, Header(max_length=128)] = None,
) -> EventStream:
    turn = TurnRequest(
        user_id=user,
        chat_id=body.chat_id,
        message=body.message,
        request_id=body.request_id or x_request_id,
        agent_key=body.agent_key,
        now=request_now(request),
        public_base_url=link_base(request),
        timezone=request_timezone(request, body.timezone),
    )
    # Everything that answers with an HTTP status (404, 409, 422, 413) happens before the stream starts; a
    # budget's or the rate limit's refusal is the stream's one event, `run.error` (what its clients display).
    try:
        prepared = await prepare_turn(ctx.deps, turn)
    except TooManyRequests as refusal:
        chat_id, request_id = body.chat_id or "", turn.request_id or ""
        return stream_refusal(ctx, NativeEncoder(), refusal, chat_id=chat_id, request_id=request_id)
    if isinstance(prepared, TurnResult):
        return stream_frames(ctx, _replayed(ctx, prepared), native_sse, ids=native_id)
    turn_events = PendingTurn(prepared)
    return stream_run(ctx, NativeEncoder(), turn_events.events(), turn=turn_events)


def _last_event_id(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        seq = int(value)
    except ValueError:
        seq = -1
    if seq < 0:
        raise InvalidRequest("Last-Event-ID must be the seq of an event of this run", param="Last-Event-ID")
    return seq


async def _resumed(events: AsyncGenerator[dict[str, Any], None]) -> AsyncGenerator[dict[str, Any], None]:
    """The resumed events; a log that stops short of the run's end ends the stream with `stream.error`."""
    try:
        async with contextlib.aclosing(events) as source:
            async for event in source:
                yield event
    except ResumeBroken as broken:
        logger.warning("a resumed stream cannot continue", extra={"reason": str(broken)})
        yield {"type": "stream.error", "code": ResumeUnavailable.code, "message": RESUME_BROKEN}


RESUME_BROKEN = "the run's event log is incomplete: the stream cannot continue (GET /api/ap/chat shows the run)"


@router.get(
    "/runs/{run_id}/events",
    response_class=EventStreamResponse,
    responses=error_responses(404, 410, 422),
)
async def run_events(
    run_id: PathId,
    ctx: Ctx,
    user: User,
    after: Annotated[int | None, Query(ge=0, description="Resume after this seq (else Last-Event-ID, else 0)")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> EventStream:
    """Resume a run's native stream on any instance: every event after `after` (or `Last-Event-ID`), then the
    live run's until its terminal event (docs/protocol.md, "Resume")."""
    start = after if after is not None else _last_event_id(last_event_id)
    events = await open_resume(ctx.deps, run_id, user, start or 0)
    return stream_frames(ctx, _resumed(events), native_sse, ids=native_id)


@router.post("/cancel", responses=error_responses(404))
async def cancel(body: CancelIn, ctx: Ctx, user: User) -> dict[str, Any]:
    """Ask a run to stop (owner only); it ends with run.cancel between deltas or tool steps."""
    store = ctx.deps.turns
    pointer = await store.get_run_pointer(body.run_id, int(time.time()))
    if pointer is None or pointer.user_id != user:
        raise NotFound("run not found", param="runId", code="run_not_found")
    flagged = await store.request_cancel(pointer.chat_id, pointer.run_id)
    ctx.deps.cancels.signal(pointer.run_id)
    return {"accepted": flagged, "runId": pointer.run_id, "status": "cancelling" if flagged else "not_running"}
