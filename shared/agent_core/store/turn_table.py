"""The TurnStore role on the Table port: a turn's begin (the chat's lease taken with the user message, the run and
its request marker, in one transaction) and its end (messages, run record and lease release, in one), over
RunTable's run records, leases and cancellation."""

from __future__ import annotations

import contextlib

from agent_core.domain.models import Chat, Message, Role, Run, RunPointer, RunStatus
from agent_core.domain.session_plan import DAYMARK_TTL_S, SessionPlan
from agent_core.errors import RunInProgress, ServiceUnavailable
from agent_core.observability import logger
from agent_core.store import items as it
from agent_core.store.base import (
    DuplicateRequest,
    LeaseTaken,
    SessionChanged,
    TurnContext,
    TurnStore,
    check_reservation,
)
from agent_core.store.item_size import item_size
from agent_core.store.run_table import STILL_RUNNING, RunTable
from agent_core.store.schema import GSI1, PK, SK
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Put,
    TransactionFailed,
    Update,
    UpdateOp,
    WriteOp,
    eq,
    exists,
    lt,
    not_exists,
)
from agent_core.store.transaction_groups import OP_OVERHEAD, transaction_groups

CONDITION_FAILED = "ConditionalCheckFailed"


class TurnTable(RunTable, TurnStore):
    """A turn's reads and writes: its context, its begin, restart and end, an abandoned turn."""

    async def load_turn_context(self, chat_id: str, user_id: str) -> TurnContext | None:
        """The chat, its rolling summary, the user's profile and memory records' version: one BatchGetItem."""
        keys = [it.meta_key(chat_id), it.summary_key(chat_id), it.profile_key(user_id), it.version_key(user_id)]
        found = await self.table.batch_get(keys)
        by_key = {(i[PK], i[SK]): i for i in found}
        meta = by_key.get((it.chat_pk(chat_id), it.META))
        if meta is None or meta.get("userId") != user_id:
            return None
        summary = by_key.get((it.chat_pk(chat_id), it.SUMMARY))
        profile = by_key.get((it.user_pk(user_id), "PROFILE"))
        version = by_key.get((it.records_pk(user_id), it.VERSION))
        return TurnContext(
            chat=it.chat_from_item(meta),
            summary=it.summary_from_item(summary) if summary else None,
            profile=it.profile_from_item(profile) if profile else None,
            records_version=str(version["version"]) if version else "",
        )

    def _lease_op(
        self, chat: Chat, run: Run, lease_ms: int, add_messages: int, plan: SessionPlan | None = None
    ) -> UpdateOp:
        # Leases run on the wall clock, never on a turn's overridden "now" (X-Agent-Now cannot take one over).
        at = run.lease_clock
        free = Condition.of(exists(PK)).any_of(not_exists("activeRunId"), lt("leaseExpiresAt", at))
        values: dict[str, object] = {
            "activeRunId": run.run_id,
            "leaseExpiresAt": at + lease_ms,
            **it.lease_index_keys(chat.chat_id, at),
        }
        if plan is not None:
            expected = plan.expected_session_id
            free = free.any_of(not_exists("sessionId")) if expected is None else free.any_of(eq("sessionId", expected))
            if plan.open_session_id is not None and plan.idle_due_ms is not None:
                values.update(
                    {
                        "sessionId": plan.open_session_id,
                        "sessionStartedAt": run.started_at,
                        **it.idle_index_keys(plan.chat_shard, plan.idle_due_ms),
                    }
                )
        return UpdateOp(
            it.meta_key(chat.chat_id),
            # a continuation's token on an expired lease taken over goes with it
            Update(set=values, add={"messageCount": add_messages} if add_messages else {}, remove=(it.LEASE_HOLDER,)),
            free,
        )

    @staticmethod
    def _daymark_put(plan: SessionPlan | None) -> list[WriteOp]:
        if plan is None or plan.daymark is None:
            return []
        mark = plan.daymark
        item = {
            **it.daymark_key(mark.user_id, mark.date),
            "userId": mark.user_id,
            "date": mark.date,
            **it.day_close_index_keys(mark.bucket, mark.shard, mark.close_ms, mark.user_id),
            "expiresAt": mark.close_ms // 1000 + DAYMARK_TTL_S,
        }
        # Written once per user-day: a marker the daily job already processed is left alone.
        return [Put(item, Condition.of(not_exists("doneAt")))]

    async def begin_turn(
        self,
        chat: Chat,
        run: Run,
        user_message: Message | None,
        lease_ms: int,
        plan: SessionPlan | None = None,
        reservation: UpdateOp | None = None,
    ) -> None:
        """Take the lease with the USER message (None: a turn continued by tool results stores none), and with
        them `reservation` (the turn's budget reservation: ReservationRefused when its condition fails, checked
        after the request marker and before the lease). Idempotent: calling it again after an attempt that
        committed (its answer lost to a timeout) finds its own request marker and returns."""
        message = [] if user_message is None else [Put(it.message_to_item(user_message), Condition.of(not_exists(PK)))]
        ops: list[WriteOp] = [
            Put(
                {**it.request_key(chat.chat_id, run.request_id), "runId": run.run_id},
                Condition.of(not_exists(PK)),
            ),
            self._lease_op(chat, run, lease_ms, add_messages=len(message), plan=plan),
            *message,
            Put(it.run_to_item(run), Condition.of(not_exists(PK))),
            self._pointer_put(run),
            *([] if reservation is None else [reservation]),
        ]
        marker = self._daymark_put(plan)
        try:
            try:
                await self.table.transact(ops + marker)
            except TransactionFailed as failed:
                if not (marker and failed.reasons[-1] and not any(failed.reasons[:-1])):
                    raise
                await self.table.transact(ops)  # the day was processed already: the marker stays as it is
        except TransactionFailed as failed:
            if failed.reasons and failed.reasons[0]:
                previous = await self._run_for_request(chat.chat_id, run.request_id)
                if previous is not None and previous.run_id == run.run_id:
                    return  # an earlier attempt of this very call committed (its answer was lost): done
                if previous is not None:
                    raise DuplicateRequest(previous) from failed
            check_reservation(failed, reservation, len(ops) - 1)
            await self._explain_meta_failure(chat, run)
            raise RunInProgress("another turn is running in this conversation") from failed

    async def _explain_meta_failure(self, chat: Chat, run: Run) -> None:
        """A free lease but a failed META condition: the session moved under us (SessionChanged)."""
        meta = await self.table.get(it.meta_key(chat.chat_id))
        if meta is None:
            return
        lease_free = "activeRunId" not in meta or int(meta.get("leaseExpiresAt", 0)) < run.lease_clock
        if lease_free and meta.get("sessionId") != chat.session_id:
            raise SessionChanged(it.chat_from_item(meta))
        if lease_free:
            # The lease is free now: it moved between the write and this read. Not "in progress".
            raise ServiceUnavailable("the chat changed while the turn began; try again")

    async def restart_turn(
        self, chat: Chat, previous: Run, run: Run, lease_ms: int, reservation: UpdateOp | None = None
    ) -> None:
        ops: list[WriteOp] = [
            UpdateOp(
                it.request_key(chat.chat_id, run.request_id),
                Update(set={"runId": run.run_id}),
                Condition.of(eq("runId", previous.run_id)),
            ),
            self._lease_op(chat, run, lease_ms, add_messages=0),
            Put(it.run_to_item(run), Condition.of(not_exists(PK))),
            self._pointer_put(run),
            *([] if reservation is None else [reservation]),
        ]
        try:
            await self.table.transact(ops)
        except TransactionFailed as failed:
            check_reservation(failed, reservation, len(ops) - 1)
            raise RunInProgress("another turn is running in this conversation") from failed

    @staticmethod
    def _pointer_put(run: Run) -> Put:
        pointer = RunPointer(run_id=run.run_id, chat_id=run.chat_id, user_id=run.user_id)
        return Put(it.pointer_to_item(pointer, run.lease_clock // 1000 + it.POINTER_TTL_S))

    async def run_for_request(self, chat_id: str, request_id: str) -> Run | None:
        """The run a request id of the chat began (its request marker's), or None: one read when there is none."""
        return await self._run_for_request(chat_id, request_id)

    async def _run_for_request(self, chat_id: str, request_id: str) -> Run | None:
        marker = await self.table.get(it.request_key(chat_id, request_id))
        return await self.get_run(chat_id, marker["runId"]) if marker else None

    async def finish_turn(self, run: Run, messages: list[Message], activity_at: int) -> None:
        """Messages, the RUN record and the lease release with the activity update, in one transaction.

        Large parts go to the blob store first. Idempotent, so a retry after an ambiguous failure is safe:
        messages are written only where absent or already this run's, and the RUN item only while the
        run is still running (or was failed as stale by the idle job); an attempt that finds its own
        result already written returns.
        """
        answer = _answer_message(run, messages)
        fitted = await self._fit([it.message_to_item(m) for m in messages] + [it.run_to_item(run, answer)])
        mine = Condition(((not_exists(PK), eq("runId", run.run_id)),))
        puts: list[WriteOp] = [Put(item, mine) for item in fitted[:-1]]
        run_item = fitted[-1]
        run_put = Put(run_item, STILL_RUNNING)
        meta_set = {"lastActivityAt": activity_at, GSI1.sk: it.activity_sk(activity_at, run.chat_id)}
        count = {"messageCount": len(messages)} if messages else {}
        release = UpdateOp(
            it.meta_key(run.chat_id),
            Update(set=meta_set, add=count, remove=it.LEASE_ATTRIBUTES),
            Condition.of(*it.lease_held(run.run_id, run.lease_holder)),
        )
        # Very long turns overflow one transaction: earlier messages go first, the rest commit with the run.
        groups = transaction_groups(puts, reserve_ops=2, reserve_bytes=item_size(run_item) + 2 * OP_OVERHEAD)
        for group in groups[:-1]:
            await self.table.transact(group)
        final = groups[-1]
        try:
            await self.table.transact([*final, run_put, release])
            return
        except TransactionFailed as failed:
            if await self._run_ended(run, failed.reasons[-2]):
                return
            if failed.reasons[-1] != CONDITION_FAILED or any(failed.reasons[:-1]):
                raise
        meta = await self.table.get(it.meta_key(run.chat_id))
        if meta is None:
            return  # the chat was deleted while the turn ran: its messages go with it
        if meta.get("activeRunId") == run.run_id:
            if meta.get(it.LEASE_HOLDER) != run.lease_holder:
                raise LeaseTaken(f"run {run.run_id} was continued by another process")
            # Still ours: the failed condition was something else that moved meanwhile (retried by the caller).
            raise ServiceUnavailable("the chat changed while the turn ended; try again")
        # The lease expired and another turn took it: keep our messages, leave its lease alone. The META
        # must still exist: an unconditional update would resurrect a deleted chat as an ownerless META.
        keep_lease = UpdateOp(it.meta_key(run.chat_id), Update(set=meta_set, add=count), Condition.of(exists(PK)))
        try:
            await self.table.transact([*final, run_put, keep_lease])
        except TransactionFailed as gone:
            if await self._run_ended(run, gone.reasons[-2]):
                return
            if gone.reasons[-1] is None:
                raise
            # The chat was deleted while the turn ran: its messages go with it.

    async def _run_ended(self, run: Run, run_reason: str | None) -> bool:
        """Whether the RUN put failed because there is nothing left to write: this very result is stored
        already (an earlier attempt committed), the run ended otherwise, or its chat was deleted."""
        if run_reason != CONDITION_FAILED:
            return False
        stored = await self.table.get(it.run_key(run.chat_id, run.run_id))
        if stored is None:
            return True  # deleted with its chat
        if stored.get("status") == RunStatus.RUNNING.value:
            # The condition holds again: it failed on a state that moved meanwhile (retried by the caller).
            raise ServiceUnavailable("the run changed while it ended; try again")
        if stored.get("status") != run.status.value or stored.get("endedAt") != run.ended_at:
            logger.warning("run already ended", extra={"runId": run.run_id, "status": stored.get("status")})
        return True

    async def abandon_turn(self, run: Run) -> None:
        """A run whose end cannot be written as it should (or that never started): store it as
        it is now, failed or cancelled (only if still running), and release its lease (only if still its
        own); each on its own, so either can succeed alone."""
        run_item = (await self._fit([it.run_to_item(run)]))[0]
        with contextlib.suppress(ConditionFailed):  # it ended already
            await self.table.put(run_item, STILL_RUNNING)
        await self.release_lease(run.chat_id, run.run_id)


def _answer_message(run: Run, messages: list[Message]) -> str | None:
    """The id of the ASSISTANT message holding the run's answer: its result names it instead of a copy."""
    answer = run.result.assistant_message if run.result else ""
    if not answer:
        return None
    for message in reversed(messages):
        if message.role == Role.ASSISTANT and not message.tool_calls and message.content == answer:
            return message.id
    return None
