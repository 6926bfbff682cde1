"""TableStore: every Store role, written once on the Table port (DynamoDB, SQLite or in-memory)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

from agent_core.domain.models import (
    INTERRUPTED,
    ApprovalDecision,
    Chat,
    Message,
    Role,
    Run,
    RunPointer,
    RunStatus,
    Summary,
    Wait,
    WaitKind,
    WaitStatus,
)
from agent_core.domain.session_plan import DAYMARK_TTL_S, SessionPlan
from agent_core.errors import InvalidRequest, NotFound, RunInProgress, ServiceUnavailable
from agent_core.observability import logger
from agent_core.store import items as it
from agent_core.store.base import (
    ChatPage,
    DuplicateRequest,
    MessagePage,
    RecentMessages,
    SessionChanged,
    Store,
    TurnContext,
)
from agent_core.store.blob import BlobStore
from agent_core.store.cursor import decode_cursor, encode_cursor
from agent_core.store.hierarchy import HierarchyStore
from agent_core.store.item_size import item_size
from agent_core.store.memory_records import RecordStore, RecordTable
from agent_core.store.schema import GSI1, GSI2, GSI3, PK, SK
from agent_core.store.spill import Spiller, chat_spill_prefixes
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Item,
    Key,
    Put,
    SkRange,
    Table,
    TransactionFailed,
    Update,
    UpdateOp,
    WriteOp,
    eq,
    exists,
    gt,
    lt,
    not_exists,
)

_TRANSACT_LIMIT = 100
CONDITION_FAILED = "ConditionalCheckFailed"
# A run settled as interrupted may still end itself (it outlived its lease): its own end replaces that.
_STILL_RUNNING = Condition(((eq("status", RunStatus.RUNNING.value), eq("errorCode", INTERRUPTED)),))
_RUN_END = ("status", "errorCode", "errorMessage", "endedAt", "snapshot")  # what settling a dead run sets
_QUESTION_SEARCH = 100  # newest messages searched for a dead run's question
_TRANSACT_BYTES = 3_500_000  # DynamoDB caps a transaction at 4 MB of items; keep a margin for expressions
_OP_OVERHEAD = 1024  # a condition or update expression, its names and values
_MESSAGES = SkRange(begins_with=it.MSG_PREFIX)


def _checked_cursor(cursor: str | None, attr: str, expected: str) -> Item | None:
    start = decode_cursor(cursor)
    if start is not None and start.get(attr) != expected:
        raise InvalidRequest("cursor does not belong to this listing", param="cursor")
    return start


class TableStore(HierarchyStore, Store):
    """Every role of the Store port over one table: chats and messages, turns and runs, frontend waits here,
    memory in `HierarchyStore`."""

    def __init__(self, table: Table, blobs: BlobStore | None = None) -> None:
        self.table = table
        self.records: RecordStore = RecordTable(table)
        # With a blob store, items that could cross DynamoDB's 400 KB limit keep large parts in it.
        self.spiller = Spiller(blobs) if blobs is not None else None

    async def _fit(self, items: list[Item]) -> list[Item]:
        """The items as they can be written: large parts already in the blob store (before any write)."""
        if self.spiller is None:
            return items
        return [await self.spiller.fit(item) for item in items]

    async def _restore(self, items: list[Item]) -> list[Item]:
        return items if self.spiller is None else await self.spiller.restore(items)

    async def create_chat(self, chat: Chat, request_id: str | None = None) -> Chat:
        if request_id is None:
            await self.table.put(it.chat_to_item(chat), Condition.of(not_exists(PK)))
            return chat
        # The chat and its (user, requestId) marker in one conditional write: never a read, then a write.
        marker_key = it.first_request_key(chat.user_id, request_id)
        ops: list[WriteOp] = [
            Put(it.chat_to_item(chat), Condition.of(not_exists(PK))),
            Put({**marker_key, "chatId": chat.chat_id}, Condition.of(not_exists(PK))),
        ]
        try:
            await self.table.transact(ops)
            return chat
        except TransactionFailed as failed:
            if len(failed.reasons) < 2 or not failed.reasons[1]:
                raise
            marker = await self.table.get(marker_key)
            if marker is None:  # only a marker's deletion could get here; the caller may try again
                raise ServiceUnavailable("the chat changed while the turn began; try again") from failed
            first = await self.get_chat(str(marker["chatId"]), chat.user_id)
            if first is None:
                raise NotFound(
                    "the chat this requestId opened no longer exists", param="requestId", code="conversation_not_found"
                ) from failed
            return first  # this very call's chat when an earlier attempt of it committed (its answer lost)

    async def get_chat(self, chat_id: str, user_id: str) -> Chat | None:
        item = await self.table.get(it.meta_key(chat_id))
        if item is None or item.get("userId") != user_id:
            return None
        return it.chat_from_item(item)

    async def list_chats(self, user_id: str, limit: int, cursor: str | None) -> ChatPage:
        pk = it.user_chats_pk(user_id)
        page = await self.table.query(
            pk,
            index=GSI1.name,
            forward=False,
            limit=limit,
            start_key=_checked_cursor(cursor, GSI1.pk, pk),
        )
        return ChatPage([it.chat_from_item(i) for i in page.items], encode_cursor(page.last_key))

    async def delete_chat(self, chat_id: str, user_id: str) -> bool:
        """Every item of the chat; retryable: each step leaves what finds the rest (see runtime.chat_deletion)."""
        if await self.get_chat(chat_id, user_id) is None:
            return False
        if self.spiller is not None:
            # Spilled parts first: a failure half-way leaves the chat listed, and deleting it again works.
            for prefix in chat_spill_prefixes(chat_id):
                await self.spiller.blobs.delete_prefix(prefix)
        # Its memory records (in the user's partition) while the META still finds the chat.
        await self.records.delete_chat_records(user_id, chat_id)
        keys = [{PK: i[PK], SK: i[SK]} async for i in self._partition(it.chat_pk(chat_id)) if i[SK] != it.META]
        # Each run's own partition (pointer, frontend waits) before the chat's RUN item that leads to it,
        # the chat's items next, META last: a failure at any point leaves the path to what is still there.
        run_keys: list[Key] = []
        for run_sk in [k[SK] for k in keys if k[SK].startswith(it.RUN_PREFIX)]:
            run_keys += [
                {PK: i[PK], SK: i[SK]} async for i in self._partition(it.run_pk(run_sk.removeprefix(it.RUN_PREFIX)))
            ]
        await self.table.batch_delete(run_keys)
        await self.table.batch_delete(keys)
        await self.table.delete(it.meta_key(chat_id))
        return True

    async def _partition(self, pk: str) -> AsyncIterator[Item]:
        start: Item | None = None
        while True:
            page = await self.table.query(pk, start_key=start, limit=500)
            for item in page.items:
                yield item
            if page.last_key is None:
                return
            start = page.last_key

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

    async def list_messages(self, chat_id: str, user_id: str, limit: int, cursor: str | None) -> MessagePage | None:
        """A page of the chat's messages, oldest first; None when the chat is not the caller's."""
        if await self.get_chat(chat_id, user_id) is None:
            return None
        pk = it.chat_pk(chat_id)
        start = _checked_cursor(cursor, PK, pk)
        page = await self.table.query(pk, _MESSAGES, limit=limit, start_key=start)
        items = await self._restore(page.items)
        return MessagePage([it.message_from_item(i) for i in items], encode_cursor(page.last_key))

    async def recent_messages(self, chat_id: str, after_id: str | None, limit: int) -> RecentMessages:
        low = it.message_sk(after_id) if after_id else it.MSG_PREFIX
        # The range includes the cover message itself (BETWEEN is inclusive), and DynamoDB returns a
        # LastEvaluatedKey whenever it stops at Limit: read one more than asked and decide from the rows.
        page = await self.table.query(
            it.chat_pk(chat_id), SkRange(low=low, high=it.MSG_END), forward=False, limit=limit + 1
        )
        messages = [it.message_from_item(i) for i in await self._restore(page.items) if i[SK] != low]
        truncated = len(messages) > limit
        messages = messages[:limit]
        messages.reverse()
        return RecentMessages(items=messages, truncated=truncated)

    async def messages_between(self, chat_id: str, after_id: str | None, upto_id: str | None) -> list[Message]:
        low = it.message_sk(after_id) if after_id else it.MSG_PREFIX
        high = it.message_sk(upto_id) if upto_id else it.MSG_END
        found: list[Message] = []
        start: Item | None = None
        while True:
            page = await self.table.query(it.chat_pk(chat_id), SkRange(low=low, high=high), start_key=start, limit=500)
            found.extend(it.message_from_item(i) for i in await self._restore(page.items) if i[SK] != low)
            if page.last_key is None:
                return found
            start = page.last_key

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
                        GSI2.pk: f"IDLE#{plan.chat_shard}",
                        GSI2.sk: f"{plan.idle_due_ms:015d}",
                    }
                )
        return UpdateOp(
            it.meta_key(chat.chat_id),
            Update(set=values, add={"messageCount": add_messages} if add_messages else {}),
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
            GSI3.pk: f"DAYCLOSE#{mark.bucket}#{mark.shard}",
            GSI3.sk: f"{mark.close_ms:015d}#{mark.user_id}",
            "expiresAt": mark.close_ms // 1000 + DAYMARK_TTL_S,
        }
        # Written once per user-day: a marker the daily job already processed is left alone.
        return [Put(item, Condition.of(not_exists("doneAt")))]

    async def begin_turn(
        self, chat: Chat, run: Run, user_message: Message | None, lease_ms: int, plan: SessionPlan | None = None
    ) -> None:
        """Take the lease with the USER message (None: a turn continued by tool results stores none).
        Idempotent: calling it again after an attempt that committed (its answer lost to a timeout) finds
        its own request marker and returns."""
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

    async def restart_turn(self, chat: Chat, previous: Run, run: Run, lease_ms: int) -> None:
        ops: list[WriteOp] = [
            UpdateOp(
                it.request_key(chat.chat_id, run.request_id),
                Update(set={"runId": run.run_id}),
                Condition.of(eq("runId", previous.run_id)),
            ),
            self._lease_op(chat, run, lease_ms, add_messages=0),
            Put(it.run_to_item(run), Condition.of(not_exists(PK))),
            self._pointer_put(run),
        ]
        try:
            await self.table.transact(ops)
        except TransactionFailed as failed:
            raise RunInProgress("another turn is running in this conversation") from failed

    @staticmethod
    def _pointer_put(run: Run) -> Put:
        pointer = RunPointer(run_id=run.run_id, chat_id=run.chat_id, user_id=run.user_id)
        return Put(it.pointer_to_item(pointer, run.lease_clock // 1000 + it.POINTER_TTL_S))

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
        run_put = Put(run_item, _STILL_RUNNING)
        meta_set = {"lastActivityAt": activity_at, GSI1.sk: it.activity_sk(activity_at, run.chat_id)}
        count = {"messageCount": len(messages)} if messages else {}
        release = UpdateOp(
            it.meta_key(run.chat_id),
            Update(set=meta_set, add=count, remove=it.LEASE_ATTRIBUTES),
            Condition.of(eq("activeRunId", run.run_id)),
        )
        # Very long turns overflow one transaction: earlier messages go first, the rest commit with the run.
        groups = _transaction_groups(puts, reserve_ops=2, reserve_bytes=item_size(run_item) + 2 * _OP_OVERHEAD)
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
            await self.table.put(run_item, _STILL_RUNNING)
        await self.release_lease(run.chat_id, run.run_id)

    async def release_lease(self, chat_id: str, run_id: str) -> bool:
        """Free the chat's lease if this run holds it; False when another run (or none) holds it.

        A failed condition is checked by reading the META again: only a lease that is really not ours
        is left alone (a conflict is not "another turn took it").
        """
        release = Update(remove=it.LEASE_ATTRIBUTES)
        try:
            await self.table.update(it.meta_key(chat_id), release, Condition.of(eq("activeRunId", run_id)))
        except ConditionFailed:
            meta = await self.table.get(it.meta_key(chat_id))
            if meta is None or meta.get("activeRunId") != run_id:
                return False
            raise ServiceUnavailable("the chat changed while its lease was released; try again") from None
        return True

    async def renew_lease(self, chat_id: str, run_id: str, expires_at: int) -> bool:
        """Extend the lease while the run lives (heartbeat); False when it is no longer this run's."""
        try:
            renew = Update(set={"leaseExpiresAt": expires_at})
            await self.table.update(it.meta_key(chat_id), renew, Condition.of(eq("activeRunId", run_id)))
        except ConditionFailed:
            return False
        return True

    async def leased_chat_pages(self, index: int, page_size: int | None = 100) -> AsyncIterator[list[Chat]]:
        """Pages of the chats of one shard whose lease is held (gsi3, sparse: keyed only while a run holds it)."""
        start: Item | None = None
        while True:
            page = await self.table.query(it.lease_index_pk(index), index=GSI3.name, limit=page_size, start_key=start)
            chats = [it.chat_from_item(i) for i in page.items if i[SK] == it.META and "activeRunId" in i]
            if chats:
                yield chats
            if page.last_key is None:
                return
            start = page.last_key

    async def question_of(self, run: Run) -> str | None:
        """The USER message a run answers, found by its requestId among the chat's newest messages."""
        start: Item | None = None
        searched = 0
        while searched < _QUESTION_SEARCH:
            rng = SkRange(low=it.MSG_PREFIX, high=it.MSG_END)
            page = await self.table.query(it.chat_pk(run.chat_id), rng, forward=False, limit=25, start_key=start)
            for item in page.items:
                if item.get("role") == Role.USER.value and item.get("requestId") == run.request_id:
                    return it.message_from_item((await self._restore([item]))[0]).content
            searched += len(page.items)
            if page.last_key is None:
                return None
            start = page.last_key
        return None

    async def fail_interrupted_run(self, run: Run, *, expired_before: int | None, release_lease: bool = True) -> bool:
        """Store a run whose process died as given (failed `interrupted`, with its replay) if it is still
        running, and free its chat's lease if the run still holds it: only once expired before
        `expired_before`, or whatever its expiry when None (the local server, sole owner of its data, at
        start). One transaction; a run that ended already has a lease it left behind freed alone.
        False when nothing was written."""
        stored = it.run_to_item(run)
        fail = UpdateOp(
            it.run_key(run.chat_id, run.run_id),
            Update(set={k: stored[k] for k in _RUN_END if k in stored}),
            Condition.of(eq("status", RunStatus.RUNNING.value)),
        )
        held = [eq("activeRunId", run.run_id)]
        if expired_before is not None:
            held.append(lt("leaseExpiresAt", expired_before))
        release = UpdateOp(it.meta_key(run.chat_id), Update(remove=it.LEASE_ATTRIBUTES), Condition.of(*held))
        try:
            await self.table.transact([fail, release] if release_lease else [fail])
        except TransactionFailed as failed:
            if release_lease and failed.reasons[0] and not failed.reasons[1]:
                with contextlib.suppress(ConditionFailed):  # the run ended, yet its lease stayed: free it
                    await self.table.update(release.key, release.update, release.condition)
                    return True
            return False
        return True

    async def add_messages(self, chat_id: str, messages: list[Message]) -> None:
        """Append messages outside a turn (imported history, daily summaries); never overwrites."""
        for start in range(0, len(messages), _TRANSACT_LIMIT - 1):
            batch = messages[start : start + _TRANSACT_LIMIT - 1]
            items = await self._fit([it.message_to_item(m) for m in batch])
            ops: list[WriteOp] = [Put(item, Condition.of(not_exists(PK))) for item in items]
            ops.append(
                UpdateOp(it.meta_key(chat_id), Update(add={"messageCount": len(batch)}), Condition.of(exists(PK)))
            )
            await self.table.transact(ops)

    async def get_run(self, chat_id: str, run_id: str) -> Run | None:
        """The run with its snapshot and stored result (the answer read from its ASSISTANT message)."""
        item = await self.table.get(it.run_key(chat_id, run_id))
        if item is None:
            return None
        run = it.run_from_item((await self._restore([item]))[0])
        answer_id = item.get(it.ANSWER_ID)
        if run.result is not None and answer_id:
            found = await self.table.get({PK: it.chat_pk(chat_id), SK: it.message_sk(answer_id)})
            if found is not None:
                run.result.assistant_message = it.message_from_item((await self._restore([found]))[0]).content
        return run

    async def get_summary(self, chat_id: str) -> Summary | None:
        item = await self.table.get(it.summary_key(chat_id))
        return it.summary_from_item(item) if item else None

    async def replace_summary(self, summary: Summary, expected_version: int | None) -> bool:
        """Atomically replace the one SUMMARY item; False when another compaction won the race."""
        condition = (
            Condition.of(not_exists(PK)) if expected_version is None else Condition.of(eq("version", expected_version))
        )
        try:
            await self.table.put(it.summary_to_item(summary), condition)
        except ConditionFailed:
            return False
        return True

    async def list_runs(self, chat_id: str, limit: int, cursor: str | None) -> tuple[list[Run], str | None]:
        """The chat's runs, oldest first (run ids sort by start time), with their replay snapshots.

        A stored result's answer is not read here (it is the run's ASSISTANT message): use `get_run`.
        """
        pk = it.chat_pk(chat_id)
        page = await self.table.query(
            pk, SkRange(low=it.RUN_PREFIX, high=it.RUN_END), limit=limit, start_key=_checked_cursor(cursor, PK, pk)
        )
        items = await self._restore(page.items)
        return [it.run_from_item(i) for i in items], encode_cursor(page.last_key)

    async def get_run_pointer(self, run_id: str, now_s: int) -> RunPointer | None:
        item = await self.table.get(it.pointer_key(run_id))
        if item is None or int(item.get("expiresAt", 0)) <= now_s:
            return None
        return it.pointer_from_item(item)

    async def request_cancel(self, chat_id: str, run_id: str) -> bool:
        """Flag a running run for cancellation, then close its waiting frontend calls; False when it already ended."""
        try:
            await self.table.update(
                it.run_key(chat_id, run_id),
                Update(set={"cancelRequested": True}),
                Condition.of(eq("status", RunStatus.RUNNING.value)),
            )
        except ConditionFailed:
            return False
        waits = await self.table.query(it.run_pk(run_id), SkRange(begins_with=it.WAIT_PREFIX))
        for item in waits.items:
            await self._close_wait({PK: item[PK], SK: item[SK]})
        return True

    async def is_cancel_requested(self, chat_id: str, run_id: str) -> bool:
        item = await self.table.get(it.run_key(chat_id, run_id))
        return bool(item and item.get("cancelRequested"))

    async def create_wait(self, wait: Wait) -> None:
        await self.table.put(it.wait_to_item(wait))

    async def get_wait(self, run_id: str, tool_id: str) -> Wait | None:
        item = await self.table.get(it.wait_key(run_id, tool_id))
        return it.wait_from_item(item) if item else None

    async def close_wait(self, run_id: str, tool_id: str) -> None:
        await self._close_wait(it.wait_key(run_id, tool_id))

    async def _close_wait(self, key: Key) -> None:
        with contextlib.suppress(ConditionFailed):  # submitted (or closed) meanwhile: it stays as it is
            closed = Update(set={"status": WaitStatus.CANCELLED.value})
            await self.table.update(key, closed, Condition.of(eq("status", WaitStatus.WAITING.value)))

    async def submit_wait(self, run_id: str, tool_id: str, user_id: str, params: object, now_s: int) -> bool:
        """Flip a waiting frontend call to submitted: only its user, only once, only before it expires."""
        condition = Condition.of(eq("status", WaitStatus.WAITING.value), eq("userId", user_id), gt("expiresAt", now_s))
        condition = condition.any_of(not_exists("kind"), eq("kind", WaitKind.FRONTEND.value))
        update = Update(set={"status": WaitStatus.SUBMITTED.value, "params": _json(params)})
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


def _answer_message(run: Run, messages: list[Message]) -> str | None:
    """The id of the ASSISTANT message holding the run's answer: its result names it instead of a copy."""
    answer = run.result.assistant_message if run.result else ""
    if not answer:
        return None
    for message in reversed(messages):
        if message.role == Role.ASSISTANT and not message.tool_calls and message.content == answer:
            return message.id
    return None


def _transaction_groups(puts: list[WriteOp], *, reserve_ops: int, reserve_bytes: int) -> list[list[WriteOp]]:
    """Split writes into transactions within DynamoDB's limits (100 items, 4 MB), in order; the last
    group keeps room for `reserve_ops` more operations of `reserve_bytes`."""
    sizes = [_op_size(p) for p in puts]
    # The final group: as many of the last writes as fit beside the reserved operations.
    tail, tail_bytes = len(puts), reserve_bytes
    while tail > 0:
        size = sizes[tail - 1]
        if len(puts) - tail + 1 + reserve_ops > _TRANSACT_LIMIT or tail_bytes + size > _TRANSACT_BYTES:
            break
        tail -= 1
        tail_bytes += size
    groups: list[list[WriteOp]] = []
    current: list[WriteOp] = []
    current_bytes = 0
    for put, size in zip(puts[:tail], sizes[:tail], strict=True):
        if current and (len(current) >= _TRANSACT_LIMIT or current_bytes + size > _TRANSACT_BYTES):
            groups.append(current)
            current, current_bytes = [], 0
        current.append(put)
        current_bytes += size
    if current:
        groups.append(current)
    groups.append(puts[tail:])
    return groups


def _op_size(op: WriteOp) -> int:
    return (item_size(op.item) if isinstance(op, Put) else 0) + _OP_OVERHEAD


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
