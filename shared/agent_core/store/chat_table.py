"""The ChatStore role on the Table port: chats and their messages."""

from __future__ import annotations

import contextlib

from agent_core.domain.models import Chat, Message
from agent_core.errors import NotFound, ServiceUnavailable
from agent_core.store import items as it
from agent_core.store.base import ChatPage, ChatStore, MessagePage, RecentMessages, check_reservation
from agent_core.store.cursor import encode_cursor
from agent_core.store.schema import GSI1, PK, SK
from agent_core.store.spill import chat_spill_prefixes
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Key,
    Put,
    SkRange,
    TransactionFailed,
    Update,
    UpdateOp,
    WriteOp,
    eq,
    exists,
    not_exists,
)
from agent_core.store.table_role import TableRole, checked_cursor
from agent_core.store.transaction_groups import TRANSACT_LIMIT

_MESSAGES = SkRange(begins_with=it.MSG_PREFIX)


class ChatTable(TableRole, ChatStore):
    """Chats (their META), their messages, and a chat's deletion with everything it holds."""

    async def create_chat(self, chat: Chat, request_id: str | None = None, reservation: UpdateOp | None = None) -> Chat:
        reserve = [] if reservation is None else [reservation]
        if request_id is None:
            if not reserve:
                await self.table.put(it.chat_to_item(chat), Condition.of(not_exists(PK)))
                return chat
            try:
                await self.table.transact([Put(it.chat_to_item(chat), Condition.of(not_exists(PK))), *reserve])
            except TransactionFailed as failed:
                check_reservation(failed, reservation, 1)
                raise ConditionFailed(f"chat {chat.chat_id} exists") from failed  # as the lone put says it
            return chat
        # The chat and its (user, requestId) marker in one conditional write: never a read, then a write. The
        # META names the marker, which its deletion deletes.
        marker_key = it.first_request_key(chat.user_id, request_id)
        ops: list[WriteOp] = [
            Put({**it.chat_to_item(chat), it.FIRST_REQUEST_ID: request_id}, Condition.of(not_exists(PK))),
            Put({**marker_key, "chatId": chat.chat_id}, Condition.of(not_exists(PK))),
            *reserve,
        ]
        try:
            await self.table.transact(ops)
            return chat
        except TransactionFailed as failed:
            if len(failed.reasons) < 2 or not failed.reasons[1]:
                check_reservation(failed, reservation, 2)
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
            start_key=checked_cursor(cursor, GSI1.pk, pk),
        )
        return ChatPage([it.chat_from_item(i) for i in page.items], encode_cursor(page.last_key))

    async def delete_chat(self, chat_id: str, user_id: str) -> bool:
        """Every item of the chat; retryable: each step leaves what finds the rest (see runtime.chat_deletion)."""
        meta = await self.table.get(it.meta_key(chat_id))
        if meta is None or meta.get("userId") != user_id:
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
        if meta.get(it.FIRST_REQUEST_ID):  # the marker of the message that opened it, while the META names it
            await self._delete_marker(user_id, str(meta[it.FIRST_REQUEST_ID]), chat_id)
        await self.table.delete(it.meta_key(chat_id))
        return True

    async def _delete_marker(self, user_id: str, request_id: str, chat_id: str) -> None:
        """The (user, requestId) marker, if it is still this chat's (a retried deletion finds it gone)."""
        with contextlib.suppress(ConditionFailed):
            await self.table.delete(it.first_request_key(user_id, request_id), Condition.of(eq("chatId", chat_id)))

    async def list_messages(self, chat_id: str, user_id: str, limit: int, cursor: str | None) -> MessagePage | None:
        """A page of the chat's messages, oldest first; None when the chat is not the caller's."""
        if await self.get_chat(chat_id, user_id) is None:
            return None
        pk = it.chat_pk(chat_id)
        start = checked_cursor(cursor, PK, pk)
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

    async def add_messages(self, chat_id: str, messages: list[Message]) -> None:
        """Append messages outside a turn (imported history, daily summaries); never overwrites."""
        for start in range(0, len(messages), TRANSACT_LIMIT - 1):
            batch = messages[start : start + TRANSACT_LIMIT - 1]
            items = await self._fit([it.message_to_item(m) for m in batch])
            ops: list[WriteOp] = [Put(item, Condition.of(not_exists(PK))) for item in items]
            ops.append(
                UpdateOp(it.meta_key(chat_id), Update(add={"messageCount": len(batch)}), Condition.of(exists(PK)))
            )
            await self.table.transact(ops)
