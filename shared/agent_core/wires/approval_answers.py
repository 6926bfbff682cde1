"""Approvals a client decides in a later request, on every wire whose run hands a call that needs approval to
its caller (`TurnRequest.approvals == "hand_over"`): the Responses API (`mcp_approval_request` /
`mcp_approval_response`), the UI message stream (`tool-approval-request` / a part in state
`approval-responded`) and AG-UI (a call of `approve_tool_call` / its `tool` message).

The request's id names the run that asked and the call (`approval_request_id`); each answer consumes the WAIT
item that run left (`find` reads them, `decide` consumes each by its conditional update right before the turn
opens, as `POST /api/ap/submit {approve}` does), so an approval request is decided once: a replayed or
concurrent request finds it decided and is refused (409) before any work. A turn that then does not open
(409 `run_in_progress`, any error before its run starts) takes its decisions back (`runtime/approvals.undo`):
the approval waits again for the client's retry. The decided calls run first in the continuation
(`TurnRequest.decided`).
"""

from __future__ import annotations

import asyncio
import json

from agent_core.domain.approval import ApprovalOutcome
from agent_core.domain.ids import now_ms
from agent_core.domain.models import ApprovalDecision, ToolCall, Wait, WaitKind, WaitStatus
from agent_core.errors import Conflict, InvalidRequest
from agent_core.runtime.approvals import DecidedCall, undo
from agent_core.store.base import TurnStore, WaitStore
from agent_core.wires.input import ApprovalAnswer

APPROVAL_PREFIX = "mcpr_"


def approval_request_id(run_id: str, tool_id: str) -> str:
    """An approval request's id: it names the run and the call whose WAIT item holds the approval."""
    return f"{APPROVAL_PREFIX}{run_id}__{tool_id}"


def approval_wait(request_id: str) -> tuple[str, str] | None:
    """(run id, tool id) an approval request's id names, or None for an id this server never gave."""
    run_id, _, tool_id = request_id.removeprefix(APPROVAL_PREFIX).partition("__")
    if not request_id.startswith(APPROVAL_PREFIX) or not run_id or not tool_id:
        return None
    return run_id, tool_id


def check_answered(pending: list[str], answers: list[ApprovalAnswer]) -> None:
    """Continuing a response that asked for approvals answers exactly those (as function calls' outputs)."""
    given = [answer.request_id for answer in answers]
    for request_id in given:
        if request_id not in pending:
            raise request_not_found(request_id)
    for request_id in pending:
        if request_id not in given:
            raise InvalidRequest(
                f"no mcp_approval_response found for approval request {request_id}",
                param="input",
                code="approval_response_missing",
            )


Found = list[tuple[ApprovalAnswer, Wait]]


async def find(waits: WaitStore, turns: TurnStore, user_id: str, chat_id: str, answers: list[ApprovalAnswer]) -> Found:
    """Each answer's approval request (this user's, this conversation's): reads only, 400 for any not found."""
    found: Found = []
    for answer in answers:
        names = approval_wait(answer.request_id)
        wait = await waits.get_wait(*names) if names is not None else None
        pointer = await turns.get_run_pointer(wait.run_id, now_ms() // 1000) if wait is not None else None
        if wait is None or wait.kind != WaitKind.APPROVAL or wait.user_id != user_id or pointer is None:
            raise request_not_found(answer.request_id)
        if pointer.chat_id != chat_id:
            raise request_not_found(answer.request_id)
        found.append((answer, wait))
    return found


async def decide(waits: WaitStore, user_id: str, found: Found) -> tuple[DecidedCall, ...]:
    """Consume each approval (its WAIT item's conditional update): the calls to run, or 409 when one was decided
    (or expired) before (those this request decided are then taken back: `undo`). Done right before the turn
    opens: a create planned twice (a background response, a retried create) consumes once."""
    decided: list[DecidedCall] = []
    for answer, wait in found:
        decision = ApprovalDecision(approved=answer.approve, by=user_id, at_ms=now_ms(), reason=answer.reason)
        if not await waits.decide_wait(wait.run_id, wait.tool_id, decision):
            await asyncio.shield(undo(waits, tuple(decided)))
            raise await _refused(waits, wait, answer.request_id)
        call = ToolCall(id=wait.tool_id, name=wait.tool_name, arguments=json.dumps(wait.args, ensure_ascii=False))
        outcome = ApprovalOutcome(
            "approved" if answer.approve else "denied", wait.reason, user_id, decision.at_ms, answer.reason
        )
        decided.append(DecidedCall(call, outcome, wait.run_id))
    return tuple(decided)


async def _refused(waits: WaitStore, wait: Wait, request_id: str) -> Conflict:
    now = await waits.get_wait(wait.run_id, wait.tool_id)
    if now is not None and now.status == WaitStatus.SUBMITTED:
        return Conflict(
            f"approval request {request_id} was already decided", param="input", code="approval_already_decided"
        )
    if now is not None and now.status == WaitStatus.CANCELLED:
        return Conflict(f"approval request {request_id} was cancelled", param="input", code="approval_cancelled")
    return Conflict(f"approval request {request_id} expired", param="input", code="approval_expired")


def request_not_found(request_id: str) -> InvalidRequest:
    return InvalidRequest(
        f"no approval request found with id {request_id}", param="input", code="approval_request_not_found"
    )
