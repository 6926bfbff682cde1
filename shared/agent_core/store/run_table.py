"""Runs on the Table port, the reading half of the TurnStore role: run records and pointers, cancellation, the
chat's lease once taken (renewed, released) and runs whose process died. A turn's writes are TurnTable's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from agent_core.domain.models import INTERRUPTED, Chat, Role, Run, RunPointer, RunStatus
from agent_core.errors import ServiceUnavailable
from agent_core.store import items as it
from agent_core.store.cursor import encode_cursor
from agent_core.store.schema import GSI3, PK, SK
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Item,
    SkRange,
    TransactionFailed,
    Update,
    UpdateOp,
    eq,
    lt,
)
from agent_core.store.table_role import TableRole, checked_cursor
from agent_core.store.wait_table import close_waiting

# A run settled as interrupted may still end itself (it outlived its lease): its own end replaces that.
STILL_RUNNING = Condition(((eq("status", RunStatus.RUNNING.value), eq("errorCode", INTERRUPTED)),))
_RUN_END = ("status", "errorCode", "errorMessage", "endedAt", "snapshot")  # what settling a dead run sets
_QUESTION_SEARCH = 100  # newest messages searched for a dead run's question


class RunTable(TableRole):
    """A chat's RUN items, each run's pointer, the META's lease attributes."""

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

    async def list_runs(self, chat_id: str, limit: int, cursor: str | None) -> tuple[list[Run], str | None]:
        """The chat's runs, oldest first (run ids sort by start time), with their replay snapshots.

        A stored result's answer is not read here (it is the run's ASSISTANT message): use `get_run`.
        """
        pk = it.chat_pk(chat_id)
        page = await self.table.query(
            pk, SkRange(low=it.RUN_PREFIX, high=it.RUN_END), limit=limit, start_key=checked_cursor(cursor, PK, pk)
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
            await close_waiting(self.table, {PK: item[PK], SK: item[SK]})
        return True

    async def is_cancel_requested(self, chat_id: str, run_id: str) -> bool:
        item = await self.table.get(it.run_key(chat_id, run_id))
        return bool(item and item.get("cancelRequested"))

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

    async def renew_lease(self, chat_id: str, run_id: str, expires_at: int, holder: str | None = None) -> bool:
        """Extend the lease while the run lives (heartbeat); False when it is no longer this run's, or another
        process continued the run (`holder`: see `items.lease_held`)."""
        try:
            renew = Update(set={"leaseExpiresAt": expires_at})
            await self.table.update(it.meta_key(chat_id), renew, Condition.of(*it.lease_held(run_id, holder)))
        except ConditionFailed:
            return False
        return True

    async def expire_lease(self, chat_id: str, run_id: str) -> bool:
        try:
            expired = Update(set={"leaseExpiresAt": 0})
            await self.table.update(it.meta_key(chat_id), expired, Condition.of(eq("activeRunId", run_id)))
        except ConditionFailed:
            return False
        return True

    async def take_over_lease(self, chat_id: str, run_id: str, now_ms: int, expires_at: int, holder: str) -> bool:
        condition = Condition.of(eq("activeRunId", run_id), lt("leaseExpiresAt", now_ms))
        taken = Update(set={"leaseExpiresAt": expires_at, it.LEASE_HOLDER: holder})
        try:
            await self.table.update(it.meta_key(chat_id), taken, condition)
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
