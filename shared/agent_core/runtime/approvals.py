"""A run's waits on people: frontend tools (the browser's params) and approvals (a yes or no before a call runs).

An approval is a WAIT item of kind `approval`, written before the call's `tool.approval` event is sent (so an
answer to the event always matches), then polled like a frontend call's. The item's conditional update decides
it exactly once: the submit that flips it (`decide_wait`), or the run when its time runs out (`expire_wait`);
a run that loses that race to an answer honours the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from agent_core.domain.approval import ApprovalOutcome, Outcome
from agent_core.domain.models import ApprovalDecision, ToolCall, WaitKind, WaitStatus
from agent_core.observability import logger
from agent_core.runtime.frontend import StoreFrontendBridge
from agent_core.store.base import WaitStore

# A cancelled wait is not an answer: the cancel that closed it ends the run (its watch cancels the waiting call).
DECIDED = (WaitStatus.SUBMITTED, WaitStatus.EXPIRED)

ApprovalMode = Literal["wait", "hand_over", "refuse"]


@dataclass(frozen=True)
class DecidedCall:
    """A call handed over for approval (its WAIT item holds the call) and decided by a later request."""

    call: ToolCall
    outcome: ApprovalOutcome
    run_id: str = ""  # the run that handed the call over (its WAIT item's)


class DecidedGate:
    """The ApprovalGate of a run that never waits (`hand_over`): the calls its request decided, else unavailable."""

    def __init__(self, decided: tuple[DecidedCall, ...]) -> None:
        self._outcomes = {d.call.id: d.outcome for d in decided}

    async def await_decision(self, tool_call_id: str, timeout_ms: int) -> ApprovalOutcome:
        return self._outcomes.get(tool_call_id, ApprovalOutcome("unavailable"))


class RunWaits(StoreFrontendBridge):
    """The run's FrontendBridge and ApprovalGate over the WaitStore; `close` ends every wait still open."""

    async def open_approval(
        self, tool_call_id: str, tool_name: str, args: Any, reason: str, timeout_ms: int, *, handed_over: bool = False
    ) -> None:
        """The approval's WAIT item (holding the call); a `handed_over` one outlives the run (a later request
        decides it), so the run's end does not close it: it expires with its timeout."""
        wait = self.wait_for(tool_call_id, timeout_ms).model_copy(
            update={"kind": WaitKind.APPROVAL, "tool_name": tool_name, "args": args, "reason": reason}
        )
        if handed_over:
            await self._store.create_wait(wait)
        else:
            await self._create(wait)

    async def await_decision(self, tool_call_id: str, timeout_ms: int) -> ApprovalOutcome:
        """The person's decision; `timeout` once the run expired the wait unanswered; `cancelled` when a cancel
        closed it and the time ran out before the run ended; `unavailable` when no wait was opened for the call."""
        if tool_call_id in self.gone:
            return ApprovalOutcome("timeout")  # a continued run's wait whose item expired unanswered
        if tool_call_id not in self._open:
            return ApprovalOutcome("unavailable")
        wait = await self.await_answer(tool_call_id, timeout_ms, until=DECIDED)
        if wait is None:
            if await self._store.expire_wait(self._run_id, tool_call_id):
                self._open = [t for t in self._open if t != tool_call_id]
                return ApprovalOutcome("timeout")
            wait = await self._store.get_wait(self._run_id, tool_call_id)  # an answer won the race: honour it
            self._open = [t for t in self._open if t != tool_call_id]
        if wait is None or wait.status == WaitStatus.CANCELLED:
            return ApprovalOutcome("cancelled")
        if wait.status == WaitStatus.EXPIRED:
            return ApprovalOutcome("timeout")
        decision: Outcome = "approved" if wait.approved is True else "denied"
        # An approved call is taken before it runs: a process that continues this run after a crash finds it
        # taken (it may have run) and does not run it again.
        if decision == "approved" and not await self._store.claim_wait(
            self._run_id, tool_call_id, int(time.time() * 1000)
        ):
            decision = "interrupted"
        return ApprovalOutcome(decision, by=wait.decided_by, at_ms=wait.decided_at, reason=wait.decision_reason)


async def undo(waits: WaitStore, decided: tuple[DecidedCall, ...]) -> None:
    """The turn these decisions were taken for did not open (the chat's lease held by another run, any error
    before the run started): the calls never ran, so each approval waits again, only while this request's
    decision is the one it holds; the client's retry decides it anew. Best effort: one left decided is refused
    as decided (409), as before."""
    for done in decided:
        outcome = done.outcome
        decision = ApprovalDecision(
            approved=outcome.decision == "approved", by=outcome.by, at_ms=outcome.at_ms, reason=outcome.reason
        )
        try:
            await waits.undecide_wait(done.run_id, done.call.id, decision)
        except Exception as exc:
            logger.warning(
                "an approval could not be taken back",
                extra={"runId": done.run_id, "toolCallId": done.call.id, "error": type(exc).__name__},
            )
