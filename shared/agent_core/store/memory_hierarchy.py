"""The MemoryStore role on the Table port (hierarchical memory): a chat's rolling summary, sessions and their idle
index, day markers, daily summaries and profiles; the messages of a span are TableRole's."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.models import Chat, DailySummary, Message, Profile, SessionSummary, Summary
from agent_core.store import items as it
from agent_core.store.base import MemoryStore
from agent_core.store.schema import GSI1, GSI2, GSI3, PK, SK
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Item,
    SkRange,
    Update,
    eq,
    not_exists,
)
from agent_core.store.table_role import TableRole


class HierarchyTable(TableRole, MemoryStore):
    """Summaries, sessions, day markers, daily summaries and profiles (hierarchical memory)."""

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

    async def get_profile(self, user_id: str) -> Profile | None:
        item = await self.table.get(it.profile_key(user_id))
        return it.profile_from_item(item) if item else None

    async def put_profile(self, profile: Profile) -> None:
        await self.table.put(it.profile_to_item(profile))

    async def set_profile_timezone(self, user_id: str, timezone: str, at_ms: int) -> Profile:
        """Set only the zone (one UpdateItem, creating the profile if needed): facts merged meanwhile stay."""
        item = await self.table.update(it.profile_key(user_id), Update(set={"timezone": timezone, "updatedAt": at_ms}))
        return it.profile_from_item(item)

    async def delete_profile(self, user_id: str) -> bool:
        """Erase the profile and every memory record of the user; False when there was no profile."""
        await self.records.delete_user_records(user_id)
        if await self.table.get(it.profile_key(user_id)) is None:
            return False
        await self.table.delete(it.profile_key(user_id))
        return True

    async def get_session(self, chat_id: str, session_id: str) -> SessionSummary | None:
        item = await self.table.get(it.session_key(chat_id, session_id))
        return it.session_from_item(item) if item else None

    async def put_session(self, session: SessionSummary) -> bool:
        """Write a session summary once; False when it exists already (the job ran before)."""
        try:
            await self.table.put(it.session_to_item(session), Condition.of(not_exists(PK)))
        except ConditionFailed:
            return False
        return True

    async def list_sessions(self, chat_id: str) -> list[SessionSummary]:
        page = await self.table.query(it.chat_pk(chat_id), SkRange(begins_with=it.SESSION_PREFIX), limit=1000)
        return [it.session_from_item(i) for i in page.items]

    async def idle_candidate_pages(
        self, shard: int, due_by_ms: int, page_size: int | None = None
    ) -> AsyncIterator[list[Chat]]:
        """Pages of chats whose open session is due by `due_by_ms` (gsi2; sparse, so only open sessions)."""
        start: Item | None = None
        while True:
            rng = SkRange(low="0", high=it.idle_due_sk(due_by_ms))
            page = await self.table.query(
                it.idle_index_pk(shard), rng, index=GSI2.name, limit=page_size, start_key=start
            )
            chats = [it.chat_from_item(i) for i in page.items if i[SK] == it.META]
            if chats:
                yield chats
            if page.last_key is None:
                return
            start = page.last_key

    async def move_idle_due(self, chat_id: str, session_id: str, due_ms: int) -> bool:
        try:
            await self.table.update(
                it.meta_key(chat_id),
                Update(set={GSI2.sk: it.idle_due_sk(due_ms)}),
                Condition.of(eq("sessionId", session_id)),
            )
        except ConditionFailed:
            return False
        return True

    async def close_session(self, chat_id: str, session_id: str) -> bool:
        """End the open session exactly once: a conditional write, whoever (turn or job) gets there first."""
        try:
            await self.table.update(
                it.meta_key(chat_id),
                Update(remove=it.SESSION_ATTRIBUTES),
                Condition.of(eq("sessionId", session_id)),
            )
        except ConditionFailed:
            return False
        return True

    async def day_mark_pages(
        self, bucket: str, shard: int, closed_by_ms: int, page_size: int | None = 1000
    ) -> AsyncIterator[list[tuple[str, str]]]:
        """Pages of (user, date) markers in one bucket whose day closed by `closed_by_ms`, not yet done.

        Bounded pages keep memory flat however many users a bucket holds.
        """
        start: Item | None = None
        high = it.day_closed_by_sk(closed_by_ms)
        while True:
            page = await self.table.query(
                it.day_close_index_pk(bucket, shard),
                SkRange(low="0", high=high),
                index=GSI3.name,
                limit=page_size,
                start_key=start,
            )
            found = [(i["userId"], i["date"]) for i in page.items if "doneAt" not in i]
            if found:
                yield found
            if page.last_key is None:
                return
            start = page.last_key

    async def is_day_done(self, user_id: str, date: str) -> bool:
        item = await self.table.get(it.daymark_key(user_id, date))
        return bool(item and "doneAt" in item)

    async def mark_day_done(self, user_id: str, date: str, at_ms: int) -> None:
        """Done: the marker leaves the closing index (sparse), so later passes no longer read it."""
        update = Update(set={"doneAt": at_ms, "userId": user_id}, remove=(GSI3.pk, GSI3.sk))
        await self.table.update(it.daymark_key(user_id, date), update)

    async def chats_active_since(self, user_id: str, since_ms: int) -> list[Chat]:
        """The user's chats with activity at or after `since_ms`, newest first (gsi1)."""
        chats: list[Chat] = []
        start: Item | None = None
        while True:
            page = await self.table.query(
                it.user_chats_pk(user_id),
                SkRange(low=f"{since_ms:015d}", high="~"),
                index=GSI1.name,
                forward=False,
                limit=100,
                start_key=start,
            )
            chats += [it.chat_from_item(i) for i in page.items]
            if page.last_key is None:
                return chats
            start = page.last_key

    async def put_daily(self, day: DailySummary) -> None:
        await self.table.put(it.daily_to_item(day))

    async def daily_range(self, user_id: str, start: str, end: str) -> list[DailySummary]:
        days = SkRange(low=f"{it.DAY_PREFIX}{start}", high=f"{it.DAY_PREFIX}{end}")
        page = await self.table.query(it.user_pk(user_id), days, limit=400)
        return [it.daily_from_item(i) for i in page.items]

    async def put_daily_message(self, message: Message) -> None:
        """The DAILY_SUMMARY message under its deterministic key: reruns overwrite; activity is not touched."""
        await self.table.put(it.message_to_item(message))
