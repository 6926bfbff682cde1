"""Approvals a client answers in its next request (the UI message stream, AG-UI), not while the run waits.

On those wires a call that needs approval does not hold the run open: the function loop writes its approval
WAIT item (kind `approval`, expiring after AGENT_TOOL_APPROVAL_TIMEOUT_MS), sends `tool.approval` and hands
the call to the client like a client tool's (the run ends, finishReason `tool_calls`). The client's next
request carries the person's answer (`ApprovalAnswer`); the turn it starts decides each answer through the
WAIT item's conditional update once it holds the chat's lease (`decide_answers`): the one answer that flips
the item is taken, so a call runs at most once and only after an approval. A late answer is a timeout told
to the model (the run flips the item to `expired` with the same condition); any other refused answer (the
call was decided already, by another request or by POST /api/ap/submit) ends the run with the error
`approval_not_accepted` before anything runs. The decided calls then run first (`DecidedGate` gives the
governed execution its outcome: approved, the tool runs; otherwise the model reads why), then the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.domain.approval import ApprovalOutcome, Outcome
from agent_core.domain.models import ApprovalDecision, ToolCall, WaitKind, WaitStatus
from agent_core.errors import Conflict
from agent_core.store.base import WaitStore

APPROVAL_ID_PREFIX = "approval-"


def approval_id(call_id: str) -> str:
    """The id a client answers an approval by (the UI stream's approvalId, AG-UI's approval tool call id)."""
    return f"{APPROVAL_ID_PREFIX}{call_id}"


class ApprovalNotAccepted(Conflict):
    code = "approval_not_accepted"


@dataclass(frozen=True)
class ApprovalAnswer:
    """A person's answer to a call handed over by the run `run_id`, brought by the client's next request."""

    run_id: str  # the run that asked (its WAIT item's key)
    call: ToolCall
    approved: bool
    by: str
    at_ms: int
    reason: str = ""


@dataclass(frozen=True)
class DecidedCall:
    call: ToolCall
    outcome: ApprovalOutcome


class DecidedGate:
    """The ApprovalGate of calls decided before they run: each call's outcome, as taken (`decide_answers`)."""

    def __init__(self, decided: list[DecidedCall]) -> None:
        self._outcomes = {d.call.id: d.outcome for d in decided}

    async def await_decision(self, tool_call_id: str, timeout_ms: int) -> ApprovalOutcome:
        return self._outcomes.get(tool_call_id, ApprovalOutcome("unavailable"))


async def decide_answers(store: WaitStore, answers: tuple[ApprovalAnswer, ...]) -> list[DecidedCall]:
    """Take each answer through its WAIT item's conditional update (exactly once); raise when one is refused."""
    decided: list[DecidedCall] = []
    for answer in answers:
        decision = ApprovalDecision(approved=answer.approved, by=answer.by, at_ms=answer.at_ms, reason=answer.reason)
        if await store.decide_wait(answer.run_id, answer.call.id, decision):
            verdict: Outcome = "approved" if answer.approved else "denied"
            outcome = ApprovalOutcome(verdict, by=answer.by, at_ms=answer.at_ms, reason=answer.reason)
            decided.append(DecidedCall(answer.call, outcome))
            continue
        wait = await store.get_wait(answer.run_id, answer.call.id)
        late = (
            wait is not None
            and wait.kind == WaitKind.APPROVAL
            and wait.user_id == answer.by
            and wait.status == WaitStatus.WAITING
            and wait.expires_at <= answer.at_ms // 1000
        )
        if late and await store.expire_wait(answer.run_id, answer.call.id):
            decided.append(DecidedCall(answer.call, ApprovalOutcome("timeout")))
            continue
        status = "already_decided" if wait is not None and wait.status == WaitStatus.SUBMITTED else "unmatched"
        if wait is not None and wait.status == WaitStatus.EXPIRED:
            status = "expired"
        raise ApprovalNotAccepted(
            f"the approval of {answer.call.name} ({answer.call.id}) was not accepted: {status}",
            param="messages",
            data={"status": status, "toolCallId": answer.call.id},
        )
    return decided
