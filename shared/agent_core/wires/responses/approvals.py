"""Approvals a client decides in its next request (`mcp_approval_response` on /v1/responses): each consumes the
WAIT item the run that asked left (its conditional update, as `POST /api/ap/submit {approve}` does), so an
approval request is decided once: a replayed or concurrent request finds it decided and is refused (409)
before any work. The decided calls run first in the continuation (`TurnRequest.decided`).
"""

from __future__ import annotations

import json

from agent_core.domain.approval import ApprovalOutcome
from agent_core.domain.ids import now_ms
from agent_core.domain.models import ApprovalDecision, ToolCall, Wait, WaitKind, WaitStatus
from agent_core.errors import Conflict, InvalidRequest
from agent_core.runtime.approvals import DecidedCall
from agent_core.store.base import TurnStore, WaitStore
from agent_core.wires.input import ApprovalAnswer
from agent_core.wires.responses.items import approval_wait


def pending_approvals(output: list[dict[str, object]]) -> list[str]:
    """The ids of a response's `mcp_approval_request` items: the caller owes their decisions."""
    return [str(item["id"]) for item in output if item.get("type") == "mcp_approval_request"]


def check_answered(pending: list[str], answers: list[ApprovalAnswer]) -> None:
    """Continuing a response that asked for approvals answers exactly those (as function calls' outputs)."""
    given = [answer.request_id for answer in answers]
    for request_id in given:
        if request_id not in pending:
            raise _not_found(request_id)
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
            raise _not_found(answer.request_id)
        if pointer.chat_id != chat_id:
            raise _not_found(answer.request_id)
        found.append((answer, wait))
    return found


async def decide(waits: WaitStore, user_id: str, found: Found) -> tuple[DecidedCall, ...]:
    """Consume each approval (its WAIT item's conditional update): the calls to run, or 409 when one was decided
    (or expired) before. Done right before the turn opens: a create planned twice (a background response, a
    retried create) consumes once."""
    decided: list[DecidedCall] = []
    for answer, wait in found:
        decision = ApprovalDecision(approved=answer.approve, by=user_id, at_ms=now_ms(), reason=answer.reason)
        if not await waits.decide_wait(wait.run_id, wait.tool_id, decision):
            raise await _refused(waits, wait, answer.request_id)
        call = ToolCall(id=wait.tool_id, name=wait.tool_name, arguments=json.dumps(wait.args, ensure_ascii=False))
        outcome = ApprovalOutcome(
            "approved" if answer.approve else "denied", wait.reason, user_id, decision.at_ms, answer.reason
        )
        decided.append(DecidedCall(call, outcome))
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


def _not_found(request_id: str) -> InvalidRequest:
    return InvalidRequest(
        f"no approval request found with id {request_id}", param="input", code="approval_request_not_found"
    )
