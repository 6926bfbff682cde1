"""Runs whose process died while they ran (a killed server, a Lambda that timed out or crashed).

Such a run's record still says `running` and its chat's lease is held until it expires (two missed
heartbeats) or, locally, until the server starts again. Settling it stores the run as failed with
`run.error` `interrupted` and a replay of its question, so the chat replays the question and the error,
and frees the lease. The turn that takes an expired lease over, the idle pass (expired leases) and the
local server at start (every lease: it is the only process that runs turns on its data) settle them.
"""

from __future__ import annotations

from agent_core.domain.events import RunError
from agent_core.domain.models import INTERRUPTED, RunStatus
from agent_core.observability import logger
from agent_core.runtime.replay import ended_unstarted
from agent_core.store.base import TurnStore
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


async def settle_interrupted_runs(
    store: TurnStore, at_ms: int, *, expired_before: int | None, user_id: str | None = None
) -> int:
    """Every held lease (of every shard of the lease index; of `user_id`'s chats only, when given) that
    expired before `expired_before`, or every one when None: its run settled as interrupted and the lease
    freed. Returns how many were settled; a run that cannot be (storage failing) is logged and left for the
    next pass."""
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
