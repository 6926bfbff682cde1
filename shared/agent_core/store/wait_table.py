"""The WaitStore role on the Table port: runs waiting on a person (a frontend call's params, an approval)."""

from __future__ import annotations

import contextlib
import json

from agent_core.domain.models import ApprovalDecision, Wait, WaitKind, WaitStatus
from agent_core.store import items as it
from agent_core.store.base import WaitStore
from agent_core.store.table import Condition, ConditionFailed, Key, Table, Update, eq, gt, not_exists
from agent_core.store.table_role import TableRole


async def close_waiting(table: Table, key: Key) -> None:
    """A waiting call no longer accepts a submit; one submitted (or closed) meanwhile stays as it is."""
    with contextlib.suppress(ConditionFailed):
        closed = Update(set={"status": WaitStatus.CANCELLED.value})
        await table.update(key, closed, Condition.of(eq("status", WaitStatus.WAITING.value)))


class WaitTable(TableRole, WaitStore):
    """A run's WAIT items, in the run's own partition (its cancellation closes them: see RunTable)."""

    async def create_wait(self, wait: Wait) -> None:
        await self.table.put(it.wait_to_item(wait))

    async def get_wait(self, run_id: str, tool_id: str) -> Wait | None:
        item = await self.table.get(it.wait_key(run_id, tool_id))
        return it.wait_from_item(item) if item else None

    async def close_wait(self, run_id: str, tool_id: str) -> None:
        await close_waiting(self.table, it.wait_key(run_id, tool_id))

    async def submit_wait(self, run_id: str, tool_id: str, user_id: str, params: object, now_s: int) -> bool:
        """Flip a waiting frontend call to submitted: only its user, only once, only before it expires."""
        condition = Condition.of(eq("status", WaitStatus.WAITING.value), eq("userId", user_id), gt("expiresAt", now_s))
        condition = condition.any_of(not_exists("kind"), eq("kind", WaitKind.FRONTEND.value))
        update = Update(set={"status": WaitStatus.SUBMITTED.value, "params": json.dumps(params, ensure_ascii=False)})
        try:
            await self.table.update(it.wait_key(run_id, tool_id), update, condition)
        except ConditionFailed:
            return False
        return True

    async def decide_wait(self, run_id: str, tool_id: str, decision: ApprovalDecision) -> bool:
        """Decide a waiting approval: only its user, only once, only before it expires (or the run expires it)."""
        condition = Condition.of(
            eq("status", WaitStatus.WAITING.value),
            eq("kind", WaitKind.APPROVAL.value),
            eq("userId", decision.by),
            gt("expiresAt", decision.at_ms // 1000),
        )
        decided: dict[str, object] = {
            "status": WaitStatus.SUBMITTED.value,
            "approved": decision.approved,
            "decidedBy": decision.by,
            "decidedAt": decision.at_ms,
        }
        if decision.reason:
            decided["decisionReason"] = decision.reason
        try:
            await self.table.update(it.wait_key(run_id, tool_id), Update(set=decided), condition)
        except ConditionFailed:
            return False
        return True

    async def undecide_wait(self, run_id: str, tool_id: str, decision: ApprovalDecision) -> bool:
        """Put a decided approval back to waiting, only while `decision` is the one it holds (its person, time
        and answer): the turn it was taken for never opened, so the call never ran."""
        condition = Condition.of(
            eq("status", WaitStatus.SUBMITTED.value),
            eq("kind", WaitKind.APPROVAL.value),
            eq("decidedBy", decision.by),
            eq("decidedAt", decision.at_ms),
            eq("approved", decision.approved),
        )
        waiting = Update(
            set={"status": WaitStatus.WAITING.value}, remove=("approved", "decidedBy", "decidedAt", "decisionReason")
        )
        try:
            await self.table.update(it.wait_key(run_id, tool_id), waiting, condition)
        except ConditionFailed:
            return False
        return True

    async def claim_wait(self, run_id: str, tool_id: str, at_ms: int) -> bool:
        """Take an approved call to run it: only once, by whichever process gets here first (False: another took
        it, so it may have run already and is not run again)."""
        condition = Condition.of(
            eq("status", WaitStatus.SUBMITTED.value),
            eq("kind", WaitKind.APPROVAL.value),
            eq("approved", True),
            not_exists("claimedAt"),
        )
        try:
            await self.table.update(it.wait_key(run_id, tool_id), Update(set={"claimedAt": at_ms}), condition)
        except ConditionFailed:
            return False
        return True

    async def expire_wait(self, run_id: str, tool_id: str) -> bool:
        """The run's time for an answer ran out: a waiting call becomes expired (False: it was answered first)."""
        expired = Update(set={"status": WaitStatus.EXPIRED.value})
        try:
            await self.table.update(
                it.wait_key(run_id, tool_id), expired, Condition.of(eq("status", WaitStatus.WAITING.value))
            )
        except ConditionFailed:
            return False
        return True
