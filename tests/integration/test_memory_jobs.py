"""Hierarchical memory: sessions and the idle job, daily summaries, profile facts, time queries in one call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import DailySummaryJob, Job
from agent_core.domain.models import DailySummary, Kind
from agent_core.jobs.daily import run_daily_summary
from agent_core.jobs.session_summaries import run_idle_sessions
from agent_core.llm.base import LlmRequest
from agent_core.store.memory_table import MemoryTable
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from agent_core.store.table import Table
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.sse import events_in

DAY1 = datetime(2026, 1, 7, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai on the 7th


class JsonLlm(ScriptedLlm):
    """Summaries as the JSON the summarise function asks for; profile extraction returns one fact.

    With `session_gate`, each session summary call waits until that many have arrived (jobs that race)."""

    def __init__(self, *replies: Reply, session_gate: int = 0) -> None:
        super().__init__(*replies)
        self.session_gate = session_gate
        self.session_calls = 0
        self.sessions_arrived = asyncio.Event()

    async def stream(self, request: LlmRequest) -> Any:
        if request.purpose != "summarize":
            async for delta in super().stream(request):
                yield delta
            return
        self.requests.append(request)
        instruction = str(request.messages[0]["content"])
        from agent_core.llm.base import LlmDelta

        if self.session_gate and '"facts"' not in instruction:
            self.session_calls += 1
            if self.session_calls >= self.session_gate:
                self.sessions_arrived.set()
            await self.sessions_arrived.wait()
        if '"facts"' in instruction:
            yield LlmDelta(content='{"facts": [{"aspect": "budget", "key": "trip", "value": "about 8000 CNY"}]}')
        else:
            yield LlmDelta(
                content='{"summary": "The user planned a trip to Kyoto in April.", "keyTopics": ["Kyoto", "April trip"]}'
            )
        yield LlmDelta(finish_reason="stop")


_new_table: list[Callable[[], Table]] = [MemoryTable]


@pytest.fixture(autouse=True, params=["memory", "sqlite"])
def _each_table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Every test here runs on the in-memory table and on the embedded SQLite table (the local server's)."""
    if request.param == "memory":
        yield
        return
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    _new_table[0] = lambda: SqliteTable(db)
    yield
    _new_table[0] = MemoryTable
    db.close()


def _context(llm: Any, **settings: Any) -> AppContext:
    return build_context(
        make_settings(AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true", **settings),
        table=_new_table[0](),
        llm=llm,
        audit=lambda _: None,
    )


def _client(context: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": user})


async def _say(client: httpx.AsyncClient, chat_id: str | None, message: str, at: datetime) -> str:
    body: dict[str, Any] = {"message": message}
    if chat_id:
        body["chatId"] = chat_id
    response = await client.post("/api/ap/query", json=body, headers={"X-Agent-Now": at.isoformat()})
    assert response.status_code == 200, response.text
    return str(events_in(response.text)[0]["chatId"])


async def test_idle_job_closes_each_session_once_then_summary_and_profile() -> None:
    # Given two idle passes that both find the session open (each enqueues, then waits for the other before
    # closing), and session summary jobs that both reach the model before either writes
    llm = JsonLlm(session_gate=2)
    context = _context(llm)
    both_enqueued = asyncio.Barrier(2)
    enqueue_many = context.deps.work_queue.enqueue_many

    async def enqueue_then_meet(jobs: list[Job]) -> None:
        await enqueue_many(jobs)
        await both_enqueued.wait()

    context.deps.work_queue.enqueue_many = enqueue_then_meet  # type: ignore[method-assign]
    async with _client(context) as client:
        chat_id = await _say(client, None, "I want to visit Kyoto in April", DAY1)
        await _say(client, chat_id, "my budget is about 8000 CNY", DAY1 + timedelta(minutes=2))
        meta = await context.deps.chats.get_chat(chat_id, "alice")
        assert meta is not None and meta.session_id is not None
        # Not idle yet at +20 min: nothing closes, the due moves
        early = await run_idle_sessions(context.deps, DAY1 + timedelta(minutes=20))
        assert early.enqueued == 0
        # Two overlapping idle jobs at +40 min: the session is summarised exactly once
        async with asyncio.timeout(30):  # bounded: a pass that never enqueues fails here
            reports = await asyncio.gather(
                run_idle_sessions(context.deps, DAY1 + timedelta(minutes=40)),
                run_idle_sessions(context.deps, DAY1 + timedelta(minutes=40)),
            )
        # Summaries are enqueued before the session closes (a queue failure loses nothing), so both passes
        # may enqueue it; the close is conditional (exactly one pass closes it) and the job idempotent.
        assert sorted(int(r.details.get("closed", 0)) for r in reports) == [0, 1]
        assert [r.enqueued for r in reports] == [1, 1]
        await context.background.join()
    sessions = await context.deps.memory_store.list_sessions(chat_id)
    assert len(sessions) == 1 and sessions[0].summary.startswith("The user planned a trip")
    assert sessions[0].key_topics == ["Kyoto", "April trip"] and sessions[0].local_date == "2026-01-07"
    profile = await context.deps.memory_store.get_profile("alice")
    assert profile is not None and [(f.aspect, f.value) for f in profile.facts] == [("budget", "about 8000 CNY")]
    # The session twice (both jobs ran at once: one write won), then the profile facts once (queued only by the
    # job whose write won).
    assert len([r for r in llm.requests if r.purpose == "summarize"]) == 3


async def test_a_turn_after_the_idle_timeout_ends_the_stale_session_and_opens_a_new_one() -> None:
    context = _context(JsonLlm())
    async with _client(context) as client:
        chat_id = await _say(client, None, "first session, about Kyoto temples", DAY1)
        await _say(client, chat_id, "and gardens in Kyoto too please", DAY1 + timedelta(minutes=1))
        first = await context.deps.chats.get_chat(chat_id, "alice")
        await _say(client, chat_id, "a new topic: laptops", DAY1 + timedelta(hours=2))
        await context.background.join()
    second = await context.deps.chats.get_chat(chat_id, "alice")
    assert first is not None and second is not None and first.session_id != second.session_id
    assert [s.session_id for s in await context.deps.memory_store.list_sessions(chat_id)] == [first.session_id]


async def test_short_sessions_are_marked_done_without_an_llm_call() -> None:
    llm = JsonLlm()
    context = _context(llm)
    async with _client(context) as client:
        chat_id = await _say(client, None, "hi", DAY1)
        assert (await client.post(f"/api/ap/chat/{chat_id}/end")).json()["ended"] is True
        await context.background.join()
    sessions = await context.deps.memory_store.list_sessions(chat_id)
    assert len(sessions) == 1 and sessions[0].skipped
    assert not [r for r in llm.requests if r.purpose == "summarize"]


async def test_daily_job_summarises_the_closed_day_and_writes_it_into_the_chat() -> None:
    llm = JsonLlm()
    context = _context(llm)
    async with _client(context) as client:
        chat_id = await _say(client, None, "I want to visit Kyoto in April", DAY1)
        await _say(client, chat_id, "with a budget of 8000 CNY", DAY1 + timedelta(minutes=1))
        await run_idle_sessions(context.deps, DAY1 + timedelta(hours=1))
        await context.background.join()
        # Shanghai's day of the 7th closes at 16:00 UTC: the 16:30 run picks it up
        too_early = await run_daily_summary(context.deps, datetime(2026, 1, 7, 15, 30, tzinfo=UTC))
        assert too_early.enqueued == 0
        calls_before = len(llm.requests)
        report = await run_daily_summary(context.deps, datetime(2026, 1, 7, 16, 30, tzinfo=UTC))
        assert report.enqueued == 1
        await context.background.join()
        messages = (await client.get(f"/api/v1/conversations/{chat_id}/messages")).json()["items"]
    days = await context.deps.memory_store.daily_range("alice", "2026-01-07", "2026-01-07")
    assert len(days) == 1 and days[0].key_topics == ["Kyoto", "April trip"] and days[0].session_count == 1
    assert len(llm.requests) == calls_before, "one session that day: its summary is reused, no LLM call"
    daily = [m for m in messages if m["kind"] == Kind.DAILY_SUMMARY.value]
    assert len(daily) == 1 and daily[0]["role"] == "SYSTEM" and daily[0]["id"] == "DAY#2026-01-07"
    again = await run_daily_summary(context.deps, datetime(2026, 1, 7, 16, 30, tzinfo=UTC))
    assert again.enqueued == 0, "a processed day is not summarised twice"


async def test_a_user_still_active_is_deferred_with_a_delayed_message() -> None:
    context = _context(JsonLlm())
    sent: list[tuple[Job, int]] = []

    class Recording:
        async def enqueue(self, job: Job, delay_s: int = 0) -> None:
            sent.append((job, delay_s))

        async def enqueue_many(self, jobs: list[Job]) -> None:
            sent.extend((j, 0) for j in jobs)

    async with _client(context) as client:
        await _say(client, None, "still chatting after midnight", datetime(2026, 1, 7, 16, 25, tzinfo=UTC))
    context.deps.work_queue = Recording()
    from agent_core.jobs.daily import summarize_day

    now_ms = int(datetime(2026, 1, 7, 16, 30, tzinfo=UTC).timestamp() * 1000)
    assert (
        await summarize_day(context.deps, DailySummaryJob(user_id="alice", date="2026-01-07", now_ms=now_ms)) is False
    )
    assert len(sent) == 1 and sent[0][1] == 600 and isinstance(sent[0][0], DailySummaryJob)
    assert sent[0][0].deferrals == 1


async def test_time_query_is_answered_from_summaries_in_exactly_one_llm_call() -> None:
    llm = JsonLlm(Reply(text="Yesterday you planned Kyoto."))
    context = _context(llm)
    await context.deps.memory_store.put_daily(
        DailySummary(
            user_id="alice",
            date="2026-01-07",
            summary="The user planned a Kyoto trip.",
            key_topics=["Kyoto"],
            updated_at=0,
        )
    )
    async with _client(context) as client:
        response = await client.post(
            "/api/ap/query",
            json={"message": "昨天我们聊了什么？"},
            headers={"X-Agent-Now": "2026-01-08T03:00:00+00:00"},
        )
    events = events_in(response.text)
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "time_query"
    chat_calls = [r for r in llm.requests if r.purpose == "chat"]
    assert len(chat_calls) == 1, "exactly one LLM call"
    # The instructions first, the records in a system message of their own
    assert [m["role"] for m in chat_calls[0].messages] == ["system", "system", "user"]
    assert "The user planned a Kyoto trip." in chat_calls[0].messages[1]["content"]
    assert "".join(e["delta"] for e in events if e["type"] == "content.delta") == "Yesterday you planned Kyoto."


async def test_time_query_with_no_records_costs_no_llm_call() -> None:
    llm = JsonLlm()
    context = _context(llm)
    async with _client(context, "bob") as client:
        response = await client.post(
            "/api/ap/query",
            json={"message": "what did we talk about last week?"},
            headers={"X-Agent-Now": "2026-01-08T03:00:00+00:00"},
        )
    assert "I found no conversations from last week" in response.text
    assert llm.requests == []


async def test_profile_is_visible_and_erasable_and_joins_the_prompt() -> None:
    llm = JsonLlm()
    context = _context(llm)
    from agent_core.domain.models import Profile, ProfileFact

    await context.deps.memory_store.put_profile(
        Profile(
            user_id="alice",
            facts=[ProfileFact(aspect="interests", key="travel", value="Japan", source_date="2026-01-07")],
        )
    )
    async with _client(context) as client:
        shown = (await client.get("/api/ap/profile")).json()
        assert shown["facts"] == [
            {"aspect": "interests", "key": "travel", "value": "Japan", "sourceDate": "2026-01-07"}
        ]
        await _say(client, None, "suggest something", DAY1)
        assert "interests: travel: Japan" in llm.requests[-1].messages[1]["content"]
        assert (await client.delete("/api/ap/profile")).status_code == 204
        assert (await client.get("/api/ap/profile")).json()["facts"] == []
    other = build_app(*routes.local, context=context)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=other), base_url="http://t", headers={"X-User-Id": "eve"}
    ) as eve:
        assert (await eve.get("/api/ap/profile")).json()["facts"] == []


async def test_clock_override_stores_messages_at_that_time() -> None:
    context = _context(JsonLlm())
    async with _client(context) as client:
        chat_id = await _say(client, None, "hello from the past", DAY1)
        items = (await client.get(f"/api/v1/conversations/{chat_id}/messages")).json()["items"]
    assert items[0]["createdAt"].startswith("2026-01-07T02:00")


async def test_search_chat_history_and_get_user_profile_tools() -> None:
    from agent_core.domain.models import Profile, ProfileFact

    llm = JsonLlm(
        Reply(
            tool_calls=[
                ("c1", "search_chat_history", {"time_range": "yesterday", "query": "Kyoto"}),
                ("c2", "get_user_profile", {}),
            ]
        ),
        Reply(text="done"),
    )
    context = _context(llm)
    await context.deps.memory_store.put_daily(
        DailySummary(
            user_id="alice",
            date="2026-01-07",
            summary="The user planned a Kyoto trip.",
            key_topics=["Kyoto"],
            updated_at=0,
        )
    )
    await context.deps.memory_store.put_profile(
        Profile(
            user_id="alice",
            facts=[ProfileFact(aspect="budget", key="trip", value="8000 CNY", source_date="2026-01-07")],
        )
    )
    async with _client(context) as client:
        response = await client.post(
            "/api/ap/query", json={"message": "look it up"}, headers={"X-Agent-Now": "2026-01-08T03:00:00+00:00"}
        )
    events = events_in(response.text)
    results = {e["toolId"]: e["result"] for e in events if e["type"] == "tool.result"}
    assert results["c1"]["start"] == "2026-01-07" and "Kyoto trip" in results["c1"]["records"]
    assert results["c2"]["facts"] == [{"aspect": "budget", "key": "trip", "value": "8000 CNY", "since": "2026-01-07"}]


async def test_dead_runs_are_marked_failed_by_the_next_turn_or_by_the_idle_job() -> None:
    from agent_core.domain.models import RunStatus

    context = _context(JsonLlm(), AGENT_RUN_HEARTBEAT_MS="24000")
    chats, turns = context.deps.chats, context.deps.turns
    async with _client(context) as client:
        chat_id = await _say(client, None, "first", DAY1)
        # Given a run that died holding the lease (its Lambda was killed mid-turn)
        from agent_core.domain.models import Message, Role, Run

        at = int((DAY1 + timedelta(minutes=1)).timestamp() * 1000)
        chat = await chats.get_chat(chat_id, "alice")
        assert chat is not None
        dead = Run(run_id="dead-run", chat_id=chat_id, user_id="alice", request_id="r-dead", started_at=at)
        message = Message(id=f"{at:013d}", chat_id=chat_id, role=Role.USER, content="lost", created_at=at)
        from agent_core.memory.calendar import zone
        from agent_core.memory.session_rules import plan_session

        await turns.begin_turn(chat, dead, message, 60_000, plan_session(chat, at, zone("UTC", "UTC"), 1_800_000))
        # When the next turn comes after the lease expired, it takes the lease and fails the dead run
        await _say(client, chat_id, "are you there?", DAY1 + timedelta(minutes=3))
    run = await turns.get_run(chat_id, "dead-run")
    assert run is not None and run.status == RunStatus.FAILED and run.error_code == "interrupted"
    # And the idle job frees a dead run's lease when no turn came
    async with _client(context) as client:
        other = await _say(client, None, "second chat", DAY1)
    chat = await chats.get_chat(other, "alice")
    assert chat is not None
    at = int((DAY1 + timedelta(minutes=5)).timestamp() * 1000)
    dead2 = Run(run_id="dead-2", chat_id=other, user_id="alice", request_id="r-dead-2", started_at=at)
    message2 = Message(id=f"{at:013d}x", chat_id=other, role=Role.USER, content="lost too", created_at=at)
    await turns.begin_turn(chat, dead2, message2, 60_000, None)
    report = await run_idle_sessions(context.deps, DAY1 + timedelta(hours=2))
    assert report.details.get("runs_failed") == 1
    after = await chats.get_chat(other, "alice")
    assert after is not None and after.active_run_id is None
    assert (await turns.get_run(other, "dead-2")).status == RunStatus.FAILED  # type: ignore[union-attr]


class RecordingOffline:
    """The offline model, keeping each request: what the daily summary was asked to summarise."""

    def __init__(self) -> None:
        from agent_core.llm.offline import OfflineLlm

        self.inner = OfflineLlm()
        self.requests: list[LlmRequest] = []

    async def stream(self, request: LlmRequest) -> Any:
        self.requests.append(request)
        async for delta in self.inner.stream(request):
            yield delta


async def test_a_day_of_short_chinese_sessions_is_summarised_from_its_messages() -> None:
    """One exchange under 80 characters: the session is skipped, but the day still tells what was said."""
    llm = RecordingOffline()
    context = _context(llm)
    async with _client(context) as client:
        chat_id = await _say(client, None, "我头疼，吃了布洛芬", DAY1)
        await run_idle_sessions(context.deps, DAY1 + timedelta(hours=1))
        await context.background.join()
        sessions = await context.deps.memory_store.list_sessions(chat_id)
        assert len(sessions) == 1 and sessions[0].skipped, "too short for a session summary"
        report = await run_daily_summary(context.deps, datetime(2026, 1, 7, 16, 30, tzinfo=UTC))
        assert report.enqueued == 1
        await context.background.join()
    days = await context.deps.memory_store.daily_range("alice", "2026-01-07", "2026-01-07")
    assert len(days) == 1
    assert "布洛芬" in days[0].summary and days[0].summary != "[offline model]"
    assert days[0].message_count == 2 and days[0].session_count == 1  # the question and the offline reply
    daily_calls = [r for r in llm.requests if r.purpose == "summarize"]
    assert len(daily_calls) == 1 and "User: 我头疼，吃了布洛芬" in daily_calls[0].messages[-1]["content"]


async def test_a_day_is_never_stored_empty_over_real_messages() -> None:
    """A model that answers nothing: the day keeps its messages as its record."""

    class Blank(ScriptedLlm):
        async def stream(self, request: LlmRequest) -> Any:
            from agent_core.llm.base import LlmDelta

            self.requests.append(request)
            yield LlmDelta(content="" if request.purpose == "summarize" else "好的")
            yield LlmDelta(finish_reason="stop")

    context = _context(Blank())
    async with _client(context) as client:
        await _say(client, None, "明天提醒我买药", DAY1)
        await run_idle_sessions(context.deps, DAY1 + timedelta(hours=1))
        await run_daily_summary(context.deps, datetime(2026, 1, 7, 16, 30, tzinfo=UTC))
        await context.background.join()
    days = await context.deps.memory_store.daily_range("alice", "2026-01-07", "2026-01-07")
    assert len(days) == 1 and "User: 明天提醒我买药" in days[0].summary


async def test_a_session_across_midnight_is_told_by_both_days_each_message_once() -> None:
    """Filed under its start day (its summary), its messages after midnight are the next day's too (raw)."""
    llm = RecordingOffline()
    context = _context(llm)
    late = datetime(2026, 1, 7, 15, 50, tzinfo=UTC)  # 23:50 in Shanghai on the 7th
    async with _client(context) as client:
        chat_id = await _say(
            client, None, "我最近总是失眠，晚上睡不着，白天很累，想问问有什么办法可以改善睡眠质量", late
        )
        await _say(client, chat_id, "午夜之后：医生开的药叫右佐匹克隆", late + timedelta(minutes=20))
        # The next morning, another session in the same chat, long enough to be summarised
        morning = datetime(2026, 1, 8, 2, 0, tzinfo=UTC)  # 10:00 on the 8th
        await _say(client, chat_id, "早上好，今天想了解一下运动对睡眠的帮助，比如跑步和瑜伽哪个更好一些呢", morning)
        await _say(
            client, chat_id, "我一般晚上七点以后才有时间运动，这样会不会影响入睡", morning + timedelta(minutes=1)
        )
        await run_idle_sessions(context.deps, morning + timedelta(hours=1))
        await context.background.join()
        sessions = sorted(await context.deps.memory_store.list_sessions(chat_id), key=lambda s: s.started_at)
        assert [(s.local_date, s.skipped) for s in sessions] == [("2026-01-07", False), ("2026-01-08", False)]
        await run_daily_summary(context.deps, datetime(2026, 1, 7, 16, 30, tzinfo=UTC))
        await run_daily_summary(context.deps, datetime(2026, 1, 8, 16, 30, tzinfo=UTC))
        await context.background.join()
    daily_calls = [
        r for r in llm.requests if r.purpose == "summarize" and "Session summary (" in r.messages[-1]["content"]
    ]
    assert len(daily_calls) == 1, "the 7th has one session and nothing else: its summary is reused"
    prompt = str(daily_calls[0].messages[-1]["content"])
    assert "Session summary (2026-01-08)" in prompt and "Session summary (2026-01-07)" not in prompt
    assert prompt.count("User: 午夜之后") == 1, "the message after midnight, once, raw"
    # (the morning's answers may quote what the assistant remembered of the 7th: its messages are not there raw)
    assert "User: 我最近总是失眠" not in prompt, "the part before midnight is the 7th's"
    days = {d.date: d for d in await context.deps.memory_store.daily_range("alice", "2026-01-07", "2026-01-08")}
    assert "右佐匹克隆" in days["2026-01-07"].summary and "右佐匹克隆" in days["2026-01-08"].summary
    assert days["2026-01-08"].session_count == 1 and days["2026-01-08"].message_count == 4 + 2


async def test_a_day_not_summarised_yet_is_recalled_with_its_short_sessions_too() -> None:
    """Today (no daily summary): a summarised session by its summary, a skipped one by its messages."""
    llm = JsonLlm(Reply(text="ok"), Reply(text="ok"), Reply(text="ok"), Reply(text="Today: Kyoto, and a headache."))
    context = _context(llm)
    async with _client(context) as client:
        chat_id = await _say(client, None, "I want to visit Kyoto in April", DAY1)
        await _say(client, chat_id, "with a budget of 8000 CNY", DAY1 + timedelta(minutes=1))
        await _say(client, None, "我头疼", DAY1 + timedelta(hours=1))
        await run_idle_sessions(context.deps, DAY1 + timedelta(hours=2))
        await context.background.join()
        response = await client.post(
            "/api/ap/query",
            json={"message": "今天我们聊了什么？"},
            headers={"X-Agent-Now": (DAY1 + timedelta(hours=3)).isoformat()},
        )
    events = events_in(response.text)
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "time_query"
    assert "".join(e["delta"] for e in events if e["type"] == "content.delta") == "Today: Kyoto, and a headache."
    records = str([r for r in llm.requests if r.purpose == "chat"][-1].messages[1]["content"])
    assert "- The user planned a trip to Kyoto in April." in records
    assert "User: 我头疼" in records, "the skipped session is told by its messages"
    assert "User: I want to visit Kyoto" not in records, "the summarised session is not told twice"
