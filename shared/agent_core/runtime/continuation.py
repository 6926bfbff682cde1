"""Continuing a run whose process died while it waited on people, from its checkpoint, on any instance.

A run waiting on an approval (or a frontend tool's params) keeps a checkpoint of what it did
(runtime/checkpoint.py). If its process dies (a crash, a killed server: its chat's lease runs out), the run
is not lost: once every call it waited for is answered or out of time, `continue_run` takes the run's own
expired lease (one conditional write: only one process continues it), reads back the events its client was
sent (its durable log), and runs on with the same run id from there: the calls it waited for run as decided
(an approved one only if no process took it before: `WaitStore.claim_wait`), then the model goes on, and
the run stores its end as any run does. Its events go on in the same log after the last one, so a client
that resumes the run's stream (`GET /api/ap/runs/{runId}/events`, `Last-Event-ID`) sees it continue.

It runs as a `ContinueRunJob` (jobs/continuation.py): queued by the answer that comes for a stopped run
(`POST /api/ap/submit`), by the idle pass and by the local server at start (interrupted.py), for runs whose
waits are all answered or expired.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal

from agent_core.container import RunDeps
from agent_core.domain.checkpoint import RunCheckpoint
from agent_core.domain.ids import now_ms
from agent_core.domain.models import Run, RunStatus
from agent_core.memory.calendar import from_ms, zone
from agent_core.observability import logger
from agent_core.runtime.envelope import Envelope, envelope_from_wire
from agent_core.runtime.interrupted import PendingWaits, settle_interrupted_run, waiting_runs
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, history_limit
from agent_core.usage.budget import Reservation

Continued = Literal["continued", "not_running", "no_checkpoint", "waiting", "held", "failed"]


async def continue_run(deps: RunDeps, chat_id: str, run_id: str, user_id: str) -> Continued:
    """Continue the run from its checkpoint if it is still running, its lease expired and its waits are all
    answered or out of time; else say why not (nothing written). Idempotent: the lease goes to one process."""
    run = await deps.turns.get_run(chat_id, run_id)
    if run is None or run.user_id != user_id or run.status != RunStatus.RUNNING:
        return "not_running"
    waiting = waiting_runs(deps)
    pending = None if waiting is None else await waiting.pending(run_id, user_id, int(time.time()))
    if pending is None:
        return "no_checkpoint"
    if not pending.due:
        return "waiting"
    checkpoint = pending.checkpoint
    sent = await _sent_events(deps, run, checkpoint)
    at_ms = now_ms()
    holder = uuid.uuid4().hex
    if not await deps.turns.take_over_lease(chat_id, run_id, at_ms, at_ms + deps.settings.run_lease_ms, holder):
        return "held"  # alive after all, or another process continues it
    run.lease_holder = holder
    ids = {"chatId": chat_id, "runId": run_id}
    if sent is None:  # its client could not be told where the run goes on: it ends as without a checkpoint
        logger.warning("a waiting run's log does not reach its checkpoint: settled as interrupted", extra=ids)
        await settle_interrupted_run(deps.turns, chat_id, run_id, at_ms)
        return "failed"
    try:
        turn = await _prepared(deps, run, checkpoint, at_ms)
    except Exception:
        logger.exception("a waiting run could not be continued: settled as interrupted", extra=ids)
        await settle_interrupted_run(deps.turns, chat_id, run_id, at_ms)
        return "failed"
    logger.info("continuing a run whose process stopped while it waited", extra=ids)
    runner = TurnRunner(turn)
    prime(runner, sent, pending)
    async for _ in runner.events():
        pass
    return "continued"


async def _sent_events(deps: RunDeps, run: Run, checkpoint: RunCheckpoint) -> list[Envelope] | None:
    """Every event of the run its log holds (at least up to the checkpoint's), or None when it cannot say."""
    if deps.run_log is None:
        return None
    read = await deps.run_log.read(run.run_id, run.user_id, 0, int(time.time()))
    if read.gap or not read.events or int(read.events[-1]["seq"]) < checkpoint.seq:
        return None
    return [envelope_from_wire(wire) for wire in read.events]


async def _prepared(deps: RunDeps, run: Run, checkpoint: RunCheckpoint, at_ms: int) -> PreparedTurn:
    """The run's turn as its checkpoint left it: its chat, agent, history and prompt blocks; no new message."""
    context = await deps.turns.load_turn_context(run.chat_id, run.user_id)
    if context is None:
        raise LookupError(f"chat {run.chat_id} is gone")
    agent = deps.agents.get(run.agent_key)
    after = context.summary.covers_message_id if context.summary else None
    history = await deps.chats.recent_messages(run.chat_id, after, history_limit(deps))
    request = TurnRequest(
        user_id=run.user_id,
        message="",
        chat_id=run.chat_id,
        request_id=run.request_id,
        model=run.model,
        agent_key=agent.key,
        timezone=checkpoint.timezone,
        public_base_url=checkpoint.public_base_url,
        continuation=True,
        input_checked=True,
        client_run_id=run.client_run_id,
        ui_message_id=run.ui_message_id,
    )
    turn = PreparedTurn(
        deps,
        request,
        context.chat,
        agent,
        run,
        context.summary,
        history,
        extra_system=list(checkpoint.extra_system),
        timezone=checkpoint.timezone,
        at_ms=at_ms,
        checkpoint=checkpoint,
    )
    # The ledger counts the run once, under the day it started on (the dead process never recorded it).
    day = from_ms(run.started_at).astimezone(zone(checkpoint.timezone, deps.settings.default_timezone))
    turn.reservation = Reservation(user_id=run.user_id, day=day.date().isoformat())
    return turn


def prime(runner: TurnRunner, sent: list[Envelope], pending: PendingWaits) -> None:
    """The runner goes on from its turn's checkpoint: the events sent before in its replay, its seq after the
    last of them, what the run had produced, and the waits it polls reopened (each until its own expiry)."""
    checkpoint = runner.turn.checkpoint
    assert checkpoint is not None
    recorder = runner.recorder
    for envelope in sent:
        recorder.snapshot.feed(envelope)
    recorder.assembler.resume_at(sent[-1].seq)
    outcome = recorder.outcome
    outcome.messages = list(checkpoint.messages)
    outcome.records = list(checkpoint.records)
    outcome.usage = checkpoint.usage
    outcome.answered_by = checkpoint.answered_by
    outcome.first_token_at = checkpoint.first_token_at
    runner.run.bridge.reopen(pending.waits, pending.gone)
