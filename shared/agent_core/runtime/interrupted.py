"""Runs whose process died while they ran (a killed server, a Lambda that timed out or crashed).

Such a run's record still says `running` and its chat's lease is held until it expires (two missed
heartbeats) or, locally, until the server starts again. Settling it stores the run as failed with
`run.error` `interrupted` and a replay of its question, so the chat replays the question and the error,
and frees the lease. The turn that takes an expired lease over, the idle pass (expired leases) and the
local server at start (every lease: it is the only process that runs turns on its data) settle them.

A run that died while it waited on people and kept a checkpoint (runtime/checkpoint.py) is not settled by
these passes: once its waits are all answered or out of time, a `ContinueRunJob` continues it
(runtime/continuation.py); until then it is left waiting for its answer. (A new turn on its chat taking the
expired lease over still settles it: the user moved on.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from agent_core.container import RunDeps
from agent_core.domain.checkpoint import RunCheckpoint
from agent_core.domain.events import RunError
from agent_core.domain.jobs import ContinueRunJob, WorkQueue
from agent_core.domain.models import INTERRUPTED, Chat, RunStatus, Wait, WaitStatus
from agent_core.observability import logger
from agent_core.runtime.replay import ended_unstarted
from agent_core.store.base import TurnStore, WaitStore
from agent_core.store.run_checkpoint import RunCheckpointStore
from agent_core.store.schema import SHARDS

INTERRUPTED_MESSAGE = "the answer was interrupted (the server stopped while it ran); please ask again"


async def settle_interrupted_run(
    store: TurnStore,
    chat_id: str,
    run_id: str,
    at_ms: int,
    *,
    expired_before: int | None = None,
    release_lease: bool = True,
) -> bool:
    """Fail the run `interrupted` with its replay if it still runs; free the lease it holds (see
    `TurnStore.fail_interrupted_run` for `expired_before`). False when nothing was written."""
    run = await store.get_run(chat_id, run_id)
    if run is None:
        return False
    if run.status == RunStatus.RUNNING:
        question = await store.question_of(run)
        run.status, run.result, run.ended_at = RunStatus.FAILED, None, at_ms
        run.error_code, run.error_message = INTERRUPTED, INTERRUPTED_MESSAGE
        run.snapshot = ended_unstarted(run, RunError(code=INTERRUPTED, message=INTERRUPTED_MESSAGE), at_ms, question)
    return await store.fail_interrupted_run(run, expired_before=expired_before, release_lease=release_lease)


@dataclass(frozen=True)
class PendingWaits:
    """A waiting run's checkpoint and the WAIT items of the calls it waits for (`gone`: the calls whose item
    is past its expiry, which reads skip); `due` when they are all answered or out of time (the run can go on)."""

    checkpoint: RunCheckpoint
    waits: list[Wait]
    gone: list[str]
    due: bool


@dataclass(frozen=True)
class WaitingRuns:
    """What a pass uses to tell a dead run that waits on people (continued, not settled) from the others."""

    waits: WaitStore
    checkpoints: RunCheckpointStore
    queue: WorkQueue

    async def pending(self, run_id: str, user_id: str, now_s: int) -> PendingWaits | None:
        """None when the run keeps no checkpoint (or it waits for nothing)."""
        checkpoint = await self.checkpoints.get(run_id, user_id, now_s)
        if checkpoint is None or not checkpoint.pending:
            return None
        waits = {call.id: await self.waits.get_wait(run_id, call.id) for call in checkpoint.pending}
        found = [wait for wait in waits.values() if wait is not None]
        gone = [call_id for call_id, wait in waits.items() if wait is None]
        due = all(wait.status != WaitStatus.WAITING or wait.expires_at <= now_s for wait in found)
        return PendingWaits(checkpoint, found, gone, due)

    async def keep(self, store: TurnStore, chat: Chat, sole_owner: bool) -> Literal["queued", "waiting"] | None:
        """`queued` (its continuation), `waiting` (left for its answer), or None: settle it. A `sole_owner`
        (the local server at start) marks the lease expired now, so an answer finds the run stopped and the
        continuation can take it."""
        run_id = chat.active_run_id or ""
        pending = await self.pending(run_id, chat.user_id, int(time.time()))
        if pending is None:
            return None
        if sole_owner:
            await store.expire_lease(chat.chat_id, run_id)
        if not pending.due:
            return "waiting"
        await self.queue.enqueue(ContinueRunJob(chat_id=chat.chat_id, run_id=run_id, user_id=chat.user_id))
        return "queued"


def waiting_runs(deps: RunDeps) -> WaitingRuns | None:
    """The passes' view of dead runs that wait on people (None when runs keep no checkpoints)."""
    if deps.checkpoints is None:
        return None
    return WaitingRuns(deps.waits, deps.checkpoints, deps.work_queue)


async def settle_interrupted_runs(
    store: TurnStore,
    at_ms: int,
    *,
    expired_before: int | None,
    user_id: str | None = None,
    waiting: WaitingRuns | None = None,
) -> int:
    """Every held lease (of every shard of the lease index; of `user_id`'s chats only, when given) that
    expired before `expired_before`, or every one when None: its run settled as interrupted and the lease
    freed. Returns how many were settled; a run that cannot be (storage failing) is logged and left for the
    next pass. With `waiting`, a run that waits on people with a checkpoint is continued or left waiting."""
    settled = 0
    for index in range(SHARDS):
        async for page in store.leased_chat_pages(index):
            for chat in page:
                if chat.active_run_id is None or (user_id is not None and chat.user_id != user_id):
                    continue
                if expired_before is not None and (chat.lease_expires_at or 0) >= expired_before:
                    continue
                ids = {"chatId": chat.chat_id, "runId": chat.active_run_id}
                try:
                    kept = None if waiting is None else await waiting.keep(store, chat, expired_before is None)
                    if kept is not None:
                        logger.info(f"a stopped run that waits on people: {kept}", extra=ids)
                        continue
                    done = await settle_interrupted_run(
                        store, chat.chat_id, chat.active_run_id, at_ms, expired_before=expired_before
                    )
                except Exception:  # one run's failure stops neither the others nor the caller's pass
                    logger.exception("could not settle an interrupted run", extra=ids)
                    continue
                if done:
                    logger.info("interrupted run settled", extra=ids)
                    settled += 1
    return settled
