"""The OpenAI Responses API (stream function): /v1/responses... and GET /v1/models."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import error_responses, stream_or_json
from agent_core.api.schemas import PathId
from agent_core.api.sse import EventStream, stream_frames
from agent_core.context import AppContext
from agent_core.domain.jobs import ResponseJob
from agent_core.errors import InvalidRequest, NotFound, RunInProgress
from agent_core.runtime.blocking import run_failure
from agent_core.runtime.pending import HeldTurn
from agent_core.store.responses import ACTIVE, ResponseRecord
from agent_core.wires.responses.encoder import replay_events
from agent_core.wires.responses.encoder import sse as responses_sse
from agent_core.wires.responses.encoder import sse_id as responses_sse_id
from agent_core.wires.responses.execution import BackgroundResponses, queue_response, start_response
from agent_core.wires.responses.idempotency import HEADER as IDEMPOTENCY_HEADER
from agent_core.wires.responses.idempotency import IdempotencyKeys, answer_is_final, idempotency_key
from agent_core.wires.responses.interrupted import as_settled
from agent_core.wires.responses.items import ListQuery, list_page
from agent_core.wires.responses.plan import ResponsePlan, model_ids, plan_response
from agent_core.wires.responses.request import ResponseCreate
from agent_core.wires.responses.resume import resumed_frames

router = APIRouter(prefix="/v1", tags=["responses"], responses=error_responses(400, 401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
CANCEL_WAIT_S = 10.0
OWNER = "agent-core"


def background_runs(request: Request) -> BackgroundResponses:
    """This app's background responses (tracked tasks), created on first use."""
    state = request.app.state
    runs = getattr(state, "responses_background", None)
    if runs is None:
        runs = state.responses_background = BackgroundResponses()
    return runs


Runs = Annotated[BackgroundResponses, Depends(background_runs)]


def _not_found(response_id: str) -> NotFound:
    return NotFound(f"response {response_id!r} not found", param="response_id", code="response_not_found")


async def _owned(ctx: AppContext, response_id: str, user: str) -> ResponseRecord:
    record = await ctx.responses.get(response_id, user)
    if record is None:
        raise _not_found(response_id)
    return record


def _sse(events: AsyncGenerator[dict[str, Any], None], ctx: AppContext, turn: HeldTurn | None = None) -> EventStream:
    """Each event as `id: <sequence_number>`, `event: <type>` and `data: <json>`; `turn` when it holds its chat's
    lease."""
    return stream_frames(ctx, events, responses_sse, ids=responses_sse_id, turn=turn)


async def _listed(events: list[dict[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
    for event in events:
        yield event


@router.post(
    "/responses",
    response_model=None,
    responses={
        **stream_or_json("The Response, or its events with `stream: true`"),
        **error_responses(404, 409, 413, 502, 503, 504),
    },
)
async def create_response(
    body: ResponseCreate,
    request: Request,
    ctx: Ctx,
    user: User,
    runs: Runs,
    idempotency: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="Makes a retried create safe: a key already used answers with its first Response",
        ),
    ] = None,
) -> JSONResponse | EventStream:
    key = idempotency_key(idempotency)
    # Everything that answers with an HTTP status happens before a stream starts or a task is queued.
    plan = await plan_response(
        ctx.deps, ctx.responses, body, user, now=request_now(request), public_base_url=link_base(request)
    )
    if key is None or not body.stored:
        return await _create(plan, ctx, runs)
    claims = IdempotencyKeys(ctx.responses, ctx.settings.run_lease_ms)
    earlier = await claims.claim(user, key, plan.response_id)
    if earlier is not None:  # a retry: the first attempt's Response
        if not answer_is_final(earlier):
            raise RunInProgress("this request is still running", param=IDEMPOTENCY_HEADER)
        return await _stored(ctx, runs, earlier, stream=bool(body.stream))
    try:
        return await _create(plan, ctx, runs)
    except BaseException:
        if await ctx.responses.get(plan.response_id, user) is None:  # it saved nothing: its retry runs
            await asyncio.shield(claims.release(user, key, plan.response_id))
        raise


async def _create(plan: ResponsePlan, ctx: AppContext, runs: BackgroundResponses) -> JSONResponse | EventStream:
    body, responses, user = plan.body, ctx.responses, plan.user_id
    if body.background:
        record = await queue_response(plan, responses)
        if ctx.settings.in_lambda and not body.stream:
            # Nothing runs after a Lambda response ends: the worker runs it from the work queue.
            await ctx.deps.work_queue.enqueue(ResponseJob(response_id=record.response_id, user_id=user))
            return JSONResponse(record.body())
        log = runs.start(ctx.deps, responses, record.response_id)
        if body.stream:
            return _sse(log.follow(), ctx)
        return JSONResponse(record.body())
    if not body.stream:  # a buffered answer: the turn deadline, as on the other blocking routes
        plan.deadline_ms = ctx.settings.turn_deadline_ms
    run = await start_response(plan, responses)
    if body.stream:
        return _sse(run.streamed(), ctx, run)
    try:
        async with contextlib.aclosing(run.events()) as events:
            async for _ in events:
                pass
    finally:
        await ctx.before_response()
    if run.error is not None:
        # 502 llm_unavailable, 503 service_unavailable (Retry-After), 504 deadline_exceeded: never a 200.
        # A stored Response is kept `failed` with its error (GET /v1/responses/{id}). Its question is stored
        # (in the conversation, if any): an automatic retry by the SDK would ask it a second time.
        failure = run_failure(run.error)
        failure.retry_safe = not body.stored
        raise failure
    return JSONResponse(run.result())


@router.get(
    "/responses/{response_id}",
    response_model=None,
    responses={**stream_or_json("The Response, or its events with `stream=true`"), **error_responses(404)},
)
async def retrieve_response(
    response_id: PathId,
    ctx: Ctx,
    user: User,
    runs: Runs,
    stream: bool = False,
    starting_after: Annotated[int | None, Query(ge=-1)] = None,
    last_event_id: Annotated[
        str | None,
        Header(alias="Last-Event-ID", max_length=32, description="`starting_after`, as EventSource sends it"),
    ] = None,
) -> JSONResponse | EventStream:
    if starting_after is None and last_event_id is not None:
        if not last_event_id.lstrip("-").isdigit():
            raise InvalidRequest("Last-Event-ID must be a sequence_number", param="Last-Event-ID")
        starting_after = int(last_event_id)
    record = await as_settled(ctx.deps.turns, await _owned(ctx, response_id, user))
    return await _stored(ctx, runs, record, stream=stream, starting_after=starting_after)


async def _stored(
    ctx: AppContext,
    runs: BackgroundResponses,
    record: ResponseRecord,
    *,
    stream: bool,
    starting_after: int | None = None,
) -> JSONResponse | EventStream:
    """A stored Response (its data links signed afresh), or its events: live when it runs here, else from its
    run's log on any instance (the same events and sequence numbers), else replayed from the stored Response."""
    body = ctx.deps.data_links.refresh(record.body(), record.chat_id) if record.chat_id else record.body()
    if not stream:
        return JSONResponse(body)
    log = runs.log(record.response_id)
    if log is not None:  # a background response running here: follow it live
        return _sse(log.follow(starting_after), ctx)
    after = -1 if starting_after is None else starting_after
    resumed = await resumed_frames(ctx.deps, ctx.responses, record, after)
    if resumed is not None:
        return _sse(resumed, ctx)
    return _sse(_listed([e for e in replay_events(body) if e["sequence_number"] > after]), ctx)


@router.delete("/responses/{response_id}", responses=error_responses(404))
async def delete_response(response_id: PathId, ctx: Ctx, user: User) -> dict[str, Any]:
    record = await _owned(ctx, response_id, user)
    if record.status in ACTIVE:
        await _stop(ctx, record)
    await ctx.responses.delete(response_id, user)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


async def _stop(ctx: AppContext, record: ResponseRecord) -> None:
    """Signal a response's run (here at once, elsewhere through its RUN item's flag)."""
    if record.run_id and record.chat_id:
        ctx.deps.cancels.signal(record.run_id)
        await ctx.deps.turns.request_cancel(record.chat_id, record.run_id)


@router.post("/responses/{response_id}/cancel", responses=error_responses(404))
async def cancel_response(response_id: PathId, ctx: Ctx, user: User, runs: Runs) -> dict[str, Any]:
    """Cancel a background response; it keeps what it produced so far and ends `cancelled`."""
    responses = ctx.responses
    record = await _owned(ctx, response_id, user)
    if not record.background:
        raise InvalidRequest("only background responses can be cancelled", param="response_id")
    if record.status in ACTIVE:
        cancelled = await responses.cancel(response_id, user)
        if cancelled is not None:
            await _stop(ctx, cancelled)
        await runs.wait(response_id, CANCEL_WAIT_S)
        record = await _owned(ctx, response_id, user)
    return record.body()


@router.get("/responses/{response_id}/input_items", responses=error_responses(404))
async def input_items(
    response_id: PathId,
    ctx: Ctx,
    user: User,
    query: Annotated[ListQuery, Query()],
) -> dict[str, Any]:
    record = await _owned(ctx, response_id, user)
    return list_page(record.input_items, query)


def models_of(ctx: AppContext) -> list[dict[str, Any]]:
    """The agents (a model id naming an agent runs it) and the configured model."""
    return [{"id": i, "object": "model", "created": 0, "owned_by": OWNER} for i in model_ids(ctx.deps)]


@router.get("/models")
async def list_models(ctx: Ctx, _: User) -> dict[str, Any]:
    return {"object": "list", "data": models_of(ctx)}


@router.get("/models/{model_id:path}", responses=error_responses(404))
async def retrieve_model(model_id: str, ctx: Ctx, _: User) -> dict[str, Any]:
    for model in models_of(ctx):
        if model["id"] == model_id:
            return model
    raise NotFound(f"model {model_id!r} not found", param="model", code="model_not_found")
