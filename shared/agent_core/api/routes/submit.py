"""POST /api/ap/submit: a person answers a run's wait (submit function; imports no LLM code).

A frontend tool's answer is its `params`; a tool call's approval is `approve` (true or false) with an optional
`reason`. The WAIT item's conditional update decides each wait once; only a refused answer reads why.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import RequestBody
from agent_core.context import AppContext
from agent_core.domain.jobs import ContinueRunJob, WorkQueue
from agent_core.domain.models import ApprovalDecision, RunPointer, RunStatus, WaitKind, WaitStatus
from agent_core.domain.text import utf8_size
from agent_core.errors import InvalidRequest, PayloadTooLarge
from agent_core.observability import logger
from agent_core.store.base import ChatStore, TurnStore, WaitStore
from agent_core.store.run_checkpoint import RunCheckpointStore

router = APIRouter(prefix="/api/ap", tags=["submit"])

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
UNMATCHED = {"accepted": False, "status": "unmatched"}
ACCEPTED = {"accepted": True, "status": "accepted"}


class SubmitIn(RequestBody):
    run_id: str = Field(min_length=1, max_length=64)
    tool_id: str = Field(min_length=1, max_length=128)
    params: dict[str, Any] | None = None  # a frontend tool's result
    approve: bool | None = None  # an approval's decision
    reason: str | None = Field(None, max_length=2000)  # why (an approval's decision only)


class SubmitStore(Protocol):
    """What answering a wait uses (RunDeps parts): its waits, its runs and their chats' leases, and for a run
    whose process stopped while it waited, its checkpoint and the queue its continuation goes to."""

    waits: WaitStore
    turns: TurnStore
    chats: ChatStore
    checkpoints: RunCheckpointStore | None
    work_queue: WorkQueue


@router.post("/submit", responses=error_responses(401, 413, 422))
async def submit(body: SubmitIn, ctx: Ctx, user: User) -> dict[str, Any]:
    """200 accepted; 200 `accepted: false` with why otherwise: the run's status when it ended or is being
    cancelled, `already_decided` / `expired` for an approval, `unmatched` (unknown run or tool, another
    user's): ids leak nothing. 422 `approval_expected` (params for an approval) / `params_expected`
    (approve for a frontend tool)."""
    store = ctx.deps
    if body.approve is not None and body.params is not None:
        raise InvalidRequest("give params (a frontend tool) or approve (an approval), not both", param="approve")
    if body.reason is not None and body.approve is None:
        raise InvalidRequest("reason goes with approve (an approval's decision)", param="reason")
    if body.approve is not None:
        decision = ApprovalDecision(
            approved=body.approve, by=user, at_ms=int(time.time() * 1000), reason=body.reason or ""
        )
        return await answer_approval(store, body.run_id, body.tool_id, decision)
    params = body.params or {}
    limit = ctx.settings.max_message_bytes
    if utf8_size(json.dumps(params, ensure_ascii=False), "params") > limit:
        raise PayloadTooLarge(f"params exceed {limit} bytes (UTF-8 JSON)", param="params")
    return await answer_params(store, body.run_id, body.tool_id, user, params)


async def answer_params(store: SubmitStore, run_id: str, tool_id: str, user: str, params: object) -> dict[str, Any]:
    """A frontend tool's params: one UpdateItem resumes the run (a run whose process stopped goes on from its
    checkpoint: its continuation is queued); a refusal says why."""
    at_ms = int(time.time() * 1000)
    now_s = at_ms // 1000
    if await store.waits.submit_wait(run_id, tool_id, user, params, now_s):
        holder, pointer = await _holder(store, run_id, user, at_ms)
        if holder == "stopped" and pointer is not None:
            await _continue(store, pointer)
        return ACCEPTED
    return await _refused(store, run_id, tool_id, user, now_s, WaitKind.FRONTEND)


async def answer_approval(store: SubmitStore, run_id: str, tool_id: str, decision: ApprovalDecision) -> dict[str, Any]:
    """An approval's decision: only the answer whose conditional update flips the WAIT item decides, and only
    while a run will act on it: a live run waiting for it (its chat's lease held and renewed), or a run whose
    process stopped while it waited and that kept a checkpoint waiting for this call (its continuation is
    queued: runtime/continuation.py). A run that ended (or handed the call over to its client's next request)
    refuses with its status; a stopped run without such a checkpoint with `interrupted`."""
    now_s = decision.at_ms // 1000
    holder, pointer = await _holder(store, run_id, decision.by, decision.at_ms)
    if holder == "live" and await store.waits.decide_wait(run_id, tool_id, decision):
        return ACCEPTED
    continues = (
        holder == "stopped" and pointer is not None and await _waits_in_checkpoint(store, pointer, tool_id, now_s)
    )
    if continues and pointer is not None and await store.waits.decide_wait(run_id, tool_id, decision):
        await _continue(store, pointer)
        return ACCEPTED
    refused = await _refused(store, run_id, tool_id, decision.by, now_s, WaitKind.APPROVAL)
    if holder == "stopped" and refused == UNMATCHED:
        return {"accepted": False, "status": "interrupted"}
    return refused


async def _holder(store: SubmitStore, run_id: str, user: str, at_ms: int) -> tuple[str, RunPointer | None]:
    """`live` when the caller's run holds its chat's lease (renewed while it waits), `stopped` when it does not
    (ended, or its process died), `unknown` for a run the caller does not have; with the run's pointer."""
    pointer = await store.turns.get_run_pointer(run_id, at_ms // 1000)
    if pointer is None or pointer.user_id != user:
        return "unknown", None
    chat = await store.chats.get_chat(pointer.chat_id, user)
    if chat is None or chat.active_run_id != run_id or (chat.lease_expires_at or 0) <= at_ms:
        return "stopped", pointer
    return "live", pointer


async def _waits_in_checkpoint(store: SubmitStore, pointer: RunPointer, tool_id: str, now_s: int) -> bool:
    """The stopped run still runs and its checkpoint waits for this call: an answer lets it go on."""
    if store.checkpoints is None:
        return False
    checkpoint = await store.checkpoints.get(pointer.run_id, pointer.user_id, now_s)
    if checkpoint is None or all(call.id != tool_id for call in checkpoint.pending):
        return False
    run = await store.turns.get_run(pointer.chat_id, pointer.run_id)
    return run is not None and run.status == RunStatus.RUNNING


async def _continue(store: SubmitStore, pointer: RunPointer) -> None:
    """Queue the continuation of a stopped run (it goes on only if it kept a checkpoint and all its waits are
    answered or out of time). A queue that fails leaves it to the idle pass, which queues it again."""
    job = ContinueRunJob(chat_id=pointer.chat_id, run_id=pointer.run_id, user_id=pointer.user_id)
    try:
        await store.work_queue.enqueue(job)
    except Exception as exc:
        logger.warning(
            "a stopped run's continuation could not be queued",
            extra={"runId": pointer.run_id, "error": type(exc).__name__},
        )


async def _refused(
    store: SubmitStore, run_id: str, tool_id: str, user: str, now_s: int, kind: WaitKind
) -> dict[str, Any]:
    wait = await store.waits.get_wait(run_id, tool_id)
    if wait is not None and wait.user_id == user:
        if wait.kind != kind:
            if wait.kind == WaitKind.APPROVAL:
                raise InvalidRequest(
                    "this call waits for an approval: send approve, not params",
                    param="params",
                    code="approval_expected",
                )
            raise InvalidRequest(
                "this call waits for a frontend tool's params, not an approval", param="approve", code="params_expected"
            )
        if kind == WaitKind.APPROVAL and wait.status == WaitStatus.SUBMITTED:
            return {"accepted": False, "status": "already_decided", "approved": bool(wait.approved)}
        if kind == WaitKind.APPROVAL and (wait.status == WaitStatus.EXPIRED or wait.expires_at <= now_s):
            return {"accepted": False, "status": "expired"}
    pointer = await store.turns.get_run_pointer(run_id, now_s)
    if pointer is None or pointer.user_id != user:
        return UNMATCHED
    run = await store.turns.get_run(pointer.chat_id, pointer.run_id)
    if run is None:
        return UNMATCHED
    if run.status != RunStatus.RUNNING:
        return {"accepted": False, "status": run.status.value}
    if run.cancel_requested:
        return {"accepted": False, "status": "cancelling"}
    if wait is not None and wait.user_id == user and wait.status == WaitStatus.CANCELLED:
        return {"accepted": False, "status": "run_ended"}
    return UNMATCHED
