"""The memory tools read the user's memory through `MemoryReader` alone: given only a reader (no chats,
turns or writes to reach for), they answer from the profile and the daily summaries."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core.domain.models import Chat, DailySummary, Message, Profile, ProfileFact, SessionSummary
from agent_core.store.base import MemoryReader
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table_store import TableStore
from agent_core.tools.base import ToolContext
from agent_core.tools.builtin.memory_tools import (
    GetUserProfileTool,
    HistoryArgs,
    ProfileArgs,
    SearchChatHistoryTool,
)
from tests.support.fixtures import make_settings


class ReaderOnly:
    """Exactly the reader's methods, over a full store: any other call a tool made would fail."""

    def __init__(self, store: TableStore) -> None:
        self._store = store

    async def get_profile(self, user_id: str) -> Profile | None:
        return await self._store.get_profile(user_id)

    async def daily_range(self, user_id: str, start: str, end: str) -> list[DailySummary]:
        return await self._store.daily_range(user_id, start, end)

    async def chats_active_since(self, user_id: str, since_ms: int) -> list[Chat]:
        return await self._store.chats_active_since(user_id, since_ms)

    async def list_sessions(self, chat_id: str) -> list[SessionSummary]:
        return await self._store.list_sessions(chat_id)

    async def messages_between(self, chat_id: str, after_id: str | None, upto_id: str | None) -> list[Message]:
        return await self._store.messages_between(chat_id, after_id, upto_id)


def _context(memory: MemoryReader) -> ToolContext:
    return ToolContext(
        request_id="req-1",
        conversation_id="c_1",
        user_id="u1",
        settings=make_settings(AGENT_STORAGE="memory"),
        timezone="UTC",
        now=datetime(2026, 1, 8, 12, tzinfo=UTC),
        memory=memory,
    )


async def test_the_memory_tools_answer_from_a_memory_reader_alone() -> None:
    store = TableStore(MemoryTable())
    fact = ProfileFact(aspect="interests", key="travel", value="Kyoto trips", source_date="2026-01-06")
    await store.put_profile(Profile(user_id="u1", facts=[fact], updated_at=1))
    day = DailySummary(
        user_id="u1", date="2026-01-07", summary="Planned a Kyoto trip.", key_topics=["Kyoto"], updated_at=2
    )
    await store.put_daily(day)
    ctx = _context(ReaderOnly(store))
    profile = await GetUserProfileTool().run(ProfileArgs(aspect="interests"), ctx)
    assert profile == {
        "facts": [{"aspect": "interests", "key": "travel", "value": "Kyoto trips", "since": "2026-01-06"}]
    }
    history = await SearchChatHistoryTool().run(HistoryArgs(time_range="yesterday"), ctx)
    assert history["start"] == history["end"] == "2026-01-07"
    assert "Planned a Kyoto trip." in history["records"]
