"""Driving a Responses run: the turn's events encoded once, aggregated, and the Response saved at its end.

Streaming, blocking and background responses all iterate `ResponseRun.events()`; blocking and storage
read the encoder's aggregator, so there is one way a Response comes to be.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from agent_core.container import RunDeps
from agent_core.domain.events import RunError
from agent_core.errors import AgentError
from agent_core.observability import logger
from agent_core.runtime.approvals import undo
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.loop import DISCONNECTED, TurnRunner
from agent_core.runtime.pending import release_unstarted_turn
from agent_core.runtime.release import release_failed_run
from agent_core.runtime.turn import PreparedTurn
from agent_core.store.responses import ResponseRecord, ResponseStore
from agent_core.wires.approval_answers import approval_request_id
from agent_core.wires.encoder import encoded
from agent_core.wires.responses.encoder import ResponsesEncoder
from agent_core.wires.responses.plan import ResponsePlan, consume_approvals, plan_response
from agent_core.wires.responses.request import ResponseCreate
from agent_core.wires.responses.resume import StreamState
from agent_core.wires.turn import gated_tools, open_turn

Wire = dict[str, Any]
Emit = Callable[[Wire], None]


@dataclass
class ResponseRun:
    """A response whose turn holds the chat's lease."""

    plan: ResponsePlan
    prepared: PreparedTurn
    encoder: ResponsesEncoder
    responses: ResponseStore | None  # None with store:false: nothing is saved
    record: ResponseRecord | None
    cancel_at_start: bool = False  # cancelled while it was queued: the run starts and stops at once
    started: bool = False  # its events were iterated: the run owns its end from then on
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # the run's end and the Response are stored
    error: RunError | None = None  # the run's run.error (a blocking response answers with its status)

    async def events(self) -> AsyncGenerator[Wire, None]:
        """The run's Responses events, ending with exactly one terminal event; the Response is saved last."""
        self.started = True  # in the same step that enters the run's own try/finally
        runner = TurnRunner(self.prepared)
        if self.cancel_at_start:
            self.prepared.deps.cancels.signal(self.prepared.run.run_id)
        try:
            # A consumer that goes away ends the encoder as cancelled (the run was cancelled under it).
            async with contextlib.aclosing(encoded(self.encoder, self._watched(runner))) as events:
                async for event in events:
                    yield event
        finally:
            try:
                await asyncio.shield(self._save())
            finally:
                self.ended.set()

    async def _watched(self, runner: TurnRunner) -> AsyncGenerator[Envelope, None]:
        """The run's envelopes; its run.error kept (a blocking response answers with its status)."""
        envelopes = cast(AsyncGenerator[Envelope, None], runner.events())
        async with contextlib.aclosing(envelopes):
            async for envelope in envelopes:
                if isinstance(envelope.event, RunError):
                    self.error = envelope.event
                yield envelope

    async def streamed(self) -> AsyncGenerator[Wire, None]:
        """A foreground stream: `response.created`, `response.in_progress`, then the run."""
        for event in [*self.encoder.created(), *self.encoder.in_progress()]:
            yield event
        async with contextlib.aclosing(self.events()) as events:
            async for event in events:
                yield event

    async def settle(self) -> None:
        """A stream's end (runtime/pending.py): if the client left before the run's events started, the run
        and the Response end cancelled, as a disconnect mid-stream ends them, and the lease is freed at
        once; else until the run's end and the Response are stored."""
        if self.started:
            await self.ended.wait()
            return
        self.started = True
        try:
            self.encoder.cancel()
            await release_unstarted_turn(self.prepared, DISCONNECTED)
            await self._save()
        finally:
            self.ended.set()

    async def _save(self) -> None:
        if self.responses is None or self.record is None:
            return
        snapshot = self.encoder.aggregator.snapshot()
        self.record.status, self.record.response = str(snapshot["status"]), snapshot
        await self.responses.finish(self.record)

    def result(self) -> Wire:
        """The Response as the API returns it once the events are consumed."""
        return self.record.body() if self.record is not None else self.encoder.aggregator.snapshot()


def _state(plan: ResponsePlan, chat_id: str | None) -> StreamState:
    """How the response's stream is encoded (saved with it: a stream resumes on any instance)."""
    response = plan.response("in_progress", chat_id)
    return StreamState(response, sorted(plan.client_tools), plan.agent.key, None, *held_calls(plan))


def held_calls(plan: ResponsePlan) -> tuple[list[str], dict[str, str]]:
    """The tools whose calls the encoder holds (those that may be handed over for approval) and the calls the
    request decided, with the approval request each answers."""
    gated = gated_tools(plan.agent, plan.deps.tools) if plan.approvals == "hand_over" else []
    return gated, {d.call.id: approval_request_id(d.run_id, d.call.id) for d in plan.decided}


async def start_response(plan: ResponsePlan, responses: ResponseStore) -> ResponseRun:
    """Take the lease now (errors answer with an HTTP status); store:true saves it `in_progress` first."""
    await consume_approvals(plan)
    prepared = await open_turn(plan)
    chat_id, run_id = prepared.chat.chat_id, prepared.run.run_id
    state = _state(plan, chat_id)
    record = None
    if plan.body.stored:
        record = plan.record("in_progress", chat_id, run_id)
        record.stream = state.dump()
        try:
            await responses.create(record)
        except BaseException as exc:  # the lease is taken: free it (it would hold the chat until it expires)
            code = exc.code if isinstance(exc, AgentError) else "internal_error"
            message, at = "the response could not start", prepared.clock_ms()
            release = release_failed_run(plan.deps, prepared.run, code, message, at, prepared.request.stored_message)
            await asyncio.shield(release)
            await asyncio.shield(undo(plan.deps.waits, plan.decided))  # the decided calls never ran
            raise
    return ResponseRun(plan, prepared, state.encoder(), responses if record else None, record)


async def queue_response(plan: ResponsePlan, responses: ResponseStore) -> ResponseRecord:
    """A background response is saved `queued` with its request; `run_queued` runs it."""
    record = plan.record("queued")
    await responses.create(record)
    return record


async def run_queued(deps: RunDeps, responses: ResponseStore, response_id: str, emit: Emit | None = None) -> None:
    """Run a queued background response to its end: locally an asyncio task, in Lambda the worker's job."""
    record = await responses.load(response_id)
    if record is None or record.status != "queued" or record.request is None:
        return  # cancelled, deleted or already taken
    send = emit or (lambda event: None)
    body = ResponseCreate.model_validate(record.request)
    start_response_object = record.response  # what the encoder starts from (saved: the stream can resume)
    encoder = ResponsesEncoder(record.response, client_tools=body.client_tools)
    for event in encoder.created():
        send(event)
    try:
        plan = await plan_response(
            deps, responses, body, record.user_id, response_id=record.response_id, created_at=record.created_at
        )
        await consume_approvals(plan)
        prepared = await open_turn(plan)
    except Exception as error:
        if not isinstance(error, AgentError):
            logger.exception("background response failed to start", extra={"responseId": response_id})
        code, message = (error.code, error.message) if isinstance(error, AgentError) else ("internal_error", "")
        for event in encoder.fail(code, message or "the response could not start"):
            send(event)
        snapshot = encoder.aggregator.snapshot()
        record.status, record.response = str(snapshot["status"]), snapshot
        await responses.finish(record)
        return
    record.chat_id, record.run_id = prepared.chat.chat_id, prepared.run.run_id
    conversation = {"id": record.chat_id}
    gated, approved = held_calls(plan)
    state = StreamState(start_response_object, sorted(body.client_tools), plan.agent.key, conversation, gated, approved)
    record.stream = state.dump()
    started = await responses.start(record)
    encoder.server_label = plan.agent.key
    encoder.gated, encoder.approved = frozenset(gated), approved
    encoder.aggregator.update(conversation=conversation)
    for event in encoder.in_progress():
        send(event)
    run = ResponseRun(plan, prepared, encoder, responses, record, cancel_at_start=not started)
    async for event in run.events():
        send(event)


class EventLog:
    """A background response's events in order, for streams that follow it while it runs here."""

    def __init__(self) -> None:
        self.events: list[Wire] = []
        self.closed = False
        self._changed = asyncio.Event()

    def append(self, event: Wire) -> None:
        self.events.append(event)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int | None = None) -> AsyncGenerator[Wire, None]:
        """Every event (after sequence number `after`), then the new ones as they come, until closed."""
        sent = 0
        while True:
            waiter = self._changed
            while sent < len(self.events):
                event = self.events[sent]
                sent += 1
                if after is None or event["sequence_number"] > after:
                    yield event
            if self.closed:
                return
            await waiter.wait()


class BackgroundResponses:
    """Background responses running in this process, as tracked asyncio tasks (by response id)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._logs: dict[str, EventLog] = {}

    def start(self, deps: RunDeps, responses: ResponseStore, response_id: str) -> EventLog:
        log = EventLog()
        self._logs[response_id] = log
        task = asyncio.create_task(self._run(deps, responses, response_id, log), name=f"response-{response_id}")
        self._tasks[response_id] = task
        return log

    async def _run(self, deps: RunDeps, responses: ResponseStore, response_id: str, log: EventLog) -> None:
        try:
            await run_queued(deps, responses, response_id, log.append)
        except Exception:
            logger.exception("background response failed", extra={"responseId": response_id})
        finally:
            log.close()
            self._logs.pop(response_id, None)
            self._tasks.pop(response_id, None)

    def log(self, response_id: str) -> EventLog | None:
        return self._logs.get(response_id)

    async def wait(self, response_id: str, timeout_s: float | None) -> None:
        """Until the response's task ends here (or the timeout passes); nothing when it does not run here."""
        task = self._tasks.get(response_id)
        if task is not None:
            await asyncio.wait({task}, timeout=timeout_s)

    async def join(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks.values()))
