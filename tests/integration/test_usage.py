"""The usage ledger (exactly once per run or job) and the budgets and rate limit, on the three tables."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import UsageJob
from agent_core.domain.models import Usage
from agent_core.errors import BudgetExceeded
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.items import budget_key
from agent_core.store.memory_table import MemoryTable
from agent_core.store.schema import SK
from agent_core.store.table import Item, Key, Put, Table
from agent_core.usage.ledger import UsageRecord
from agent_core.usage.meter import UsageMeter
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.sse import events_in

DAY = "2026-11-26"
UTC_ZONE = ZoneInfo("UTC")


def _meter(table: Table, **settings: Any) -> UsageMeter:
    return UsageMeter(table, make_settings(**settings))


def _record(marker: str, prompt: int = 100, completion: int = 20, user: str = "u1", **extra: Any) -> UsageRecord:
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cache_read_tokens=40)
    return UsageRecord(user_id=user, day=DAY, model="gpt-4.1-mini", marker=marker, usage=usage, **extra)


async def test_a_record_is_added_once_however_often_it_is_written(any_table: Table) -> None:
    # Given a meter with the default price table (gpt-4.1-mini: 0.4 in, 1.6 out, 0.1 cached per million)
    meter = _meter(any_table)
    # When one run is recorded twice (a redelivered job) and another once
    assert await meter.ledger.record(_record("run:a", runs=1, tool_calls=2))
    assert not await meter.ledger.record(_record("run:a", runs=1, tool_calls=2))
    assert await meter.ledger.record(_record("run:b", runs=1))
    # Then the ledger counts two runs, their tokens and cost once each
    [row] = await meter.ledger.rows("u1", DAY, DAY)
    assert (row.day, row.model, row.runs, row.tool_calls) == (DAY, "gpt-4.1-mini", 2, 2)
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (200, 40, 80)
    # 60 x 0.4 + 40 x 0.1 + 20 x 1.6 = 60 micro-USD per run
    assert row.cost_micros == 120
    # And the day's budget item holds the same spend (the reservations settled, here none)
    spent = await meter.budget.spent("u1", DAY)
    assert (spent["tokens"], spent["costMicros"]) == (240, 120)


async def test_rows_cover_the_range_by_day_and_model(any_table: Table) -> None:
    meter = _meter(any_table)
    for day, model in (("2026-11-24", "m1"), ("2026-11-25", "m1"), ("2026-11-25", "m2"), ("2026-11-27", "m1")):
        usage = Usage(prompt_tokens=1, completion_tokens=1)
        await meter.ledger.record(UsageRecord("u1", day, model, f"run:{day}{model}", usage, runs=1))
    await meter.ledger.record(UsageRecord("u2", "2026-11-25", "m1", "run:x", Usage(prompt_tokens=5), runs=1))
    rows = await meter.ledger.rows("u1", "2026-11-25", "2026-11-26")
    assert [(r.day, r.model) for r in rows] == [("2026-11-25", "m1"), ("2026-11-25", "m2")]


# ----- through the app -----


def _context(table: Table | None = None, **settings: Any) -> AppContext:
    settings.setdefault("AGENT_DEFAULT_TIMEZONE", "UTC")  # the users' days are UTC days here
    return build_context(make_settings(**settings), table=table or MemoryTable(), llm=ScriptedLlm())


@pytest.fixture
async def app_ctx() -> AppContext:
    return _context()


def _client(context: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(*routes.chat, *routes.stream_routes, context=context)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": user}
    )


@pytest.fixture
async def client(app_ctx: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app_ctx) as c:
        yield c


async def _chat(client: httpx.AsyncClient, message: str, request_id: str | None = None) -> httpx.Response:
    headers = {"X-Request-Id": request_id} if request_id else {}
    created = await client.post("/api/v1/conversations", json={"title": "t"})
    cid = created.json()["conversationId"]
    return await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": message}, headers=headers)


async def test_each_run_is_in_the_callers_ledger_once(app_ctx: AppContext, client: httpx.AsyncClient) -> None:
    # Given a conversation answered once, then the same requestId sent again (a client retry)
    created = await client.post("/api/v1/conversations", json={"title": "t"})
    cid = created.json()["conversationId"]
    for _ in range(2):
        answer = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "hi"}, headers={"X-Request-Id": "req-1"}
        )
        assert answer.status_code == 200
    # And another turn
    assert (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "again"})).status_code == 200
    await app_ctx.background.join()
    # When the caller reads their usage
    usage = (await client.get("/api/ap/usage")).json()
    # Then two runs are counted (the replayed requestId called no model), with the scripted model's tokens
    today = datetime.now(UTC).date().isoformat()
    assert usage["to"] == today and usage["timezone"] == "UTC"
    [row] = usage["items"]
    assert (row["day"], row["model"], row["runs"]) == (today, "gpt-4.1-mini", 2)
    assert (row["inputTokens"], row["outputTokens"]) == (20, 10)
    assert usage["totals"]["runs"] == 2 and usage["budget"]["spentTokens"] == 30
    # And another user sees none of it
    async with _client(app_ctx, user="bob") as other:
        assert (await other.get("/api/ap/usage")).json()["items"] == []


async def test_a_retried_usage_job_changes_nothing(app_ctx: AppContext, client: httpx.AsyncClient) -> None:
    assert (await _chat(client, "hi")).status_code == 200
    await app_ctx.background.join()
    before = (await client.get("/api/ap/usage")).json()["items"]
    # When the queue delivers the same run's record again (an SQS redelivery, a retried worker batch)
    [run] = (await app_ctx.deps.turns.list_runs(await _only_chat(app_ctx), 10, None))[0]
    today = datetime.now(UTC).date().isoformat()
    job = UsageJob(user_id="alice", day=today, model=run.model, marker=f"run:{run.run_id}", usage=run.usage, runs=1)
    assert await app_ctx.jobs(job) is False
    assert (await client.get("/api/ap/usage")).json()["items"] == before


async def _only_chat(context: AppContext) -> str:
    page = await context.deps.chats.list_chats("alice", 10, None)
    [chat] = page.items
    return chat.chat_id


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"from": "2026-13-01"}, "invalid_date"),
        ({"from": "2026-11-27", "to": "2026-11-26"}, "invalid_date_range"),
        ({"from": "2024-01-01", "to": "2026-11-26"}, "invalid_date_range"),
    ],
)
async def test_a_bad_range_is_a_422(client: httpx.AsyncClient, query: dict[str, str], code: str) -> None:
    response = await client.get("/api/ap/usage", params=query)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == code


# ----- budgets and the rate limit -----


async def test_over_the_token_budget_a_turn_is_refused_with_429() -> None:
    # Given a budget of 20 tokens a day, a turn of the scripted model spends 15 (10 + 5), reserving 10
    context = _context(AGENT_USAGE_DAILY_TOKEN_BUDGET=20, AGENT_USAGE_RESERVE_TOKENS=10)
    async with _client(context) as client:
        assert (await _chat(client, "one")).status_code == 200
        await context.background.join()
        assert (await _chat(client, "two")).status_code == 200  # 15 spent: still below the budget
        await context.background.join()
        # When a third turn comes (30 spent)
        streamed = await client.post("/api/ap/query", json={"message": "three"})
        # Then the stream is its one terminal event: run.error with the stable code, Retry-After (to the next
        # local midnight) and nothing remaining (tests/integration/test_usage_refusals.py: every wire)
        [event] = events_in(streamed.text)
        assert (event["type"], event["code"], event["remaining"]) == ("run.error", "budget_exceeded", {"tokens": 0})
        assert 0 < event["retryAfter"] <= 86_400 and streamed.headers["Retry-After"] == str(event["retryAfter"])
        # And no chat was opened nor run recorded for it
        assert len((await context.deps.chats.list_chats("alice", 10, None)).items) == 2
        # And a buffered route answers it as a 429 with the same code, Retry-After and what remains
        refused = await _chat(client, "four")
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "budget_exceeded" and error["type"] == "rate_limit_error"
        assert 0 < int(refused.headers["Retry-After"]) <= 86_400
        assert refused.json()["data"]["remaining"] == {"tokens": 0}
        usage = (await client.get("/api/ap/usage")).json()
        assert usage["totals"]["runs"] == 2 and usage["budget"]["remainingTokens"] == 0
        # And another user is not limited by alice's spend
        async with _client(context, user="bob") as bob:
            assert (await _chat(bob, "hello")).status_code == 200


async def test_a_users_limits_item_overrides_the_settings() -> None:
    context = _context(AGENT_USAGE_DAILY_TOKEN_BUDGET=1_000_000)
    assert context.deps.usage is not None
    await context.deps.usage.limits.put("alice", {"dailyTokens": 1})
    async with _client(context) as client:
        assert (await _chat(client, "one")).status_code == 200
        await context.background.join()
        assert (await _chat(client, "two")).status_code == 429


async def test_requests_per_minute_are_limited() -> None:
    # Given 2 turns a minute, on a clock the test sets (X-Agent-Now, a dev-stage override)
    context = _context(AGENT_USAGE_REQUESTS_PER_MINUTE=2, AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE=True)
    now = {"X-Agent-Now": "2026-11-26T10:00:05Z"}
    async with _client(context) as client:
        client.headers.update(now)
        for _ in range(2):
            assert (await _chat(client, "hi")).status_code == 200
        refused = await _chat(client, "hi")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.headers["Retry-After"] == "55"
        assert refused.json()["data"]["remaining"] == {"requests": 0}
        # The next minute admits again
        client.headers["X-Agent-Now"] = "2026-11-26T10:01:00Z"
        assert (await _chat(client, "hi")).status_code == 200


async def test_stateless_runs_are_counted_under_the_caller_and_held_to_the_budget() -> None:
    # Given a budget of 40 tokens a day, and a scripted model whose calls spend 15 each (10 + 5)
    context = _context(AGENT_USAGE_DAILY_TOKEN_BUDGET=40, AGENT_USAGE_RESERVE_TOKENS=10)
    stateless = [
        ("/v1/chat/completions", {"model": "main-agent", "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "main-agent", "input": "hi", "store": False}),
        ("/api/chat/stream", {"messages": [{"role": "user", "content": "hi"}]}),
    ]
    async with _client(context) as client:
        # When alice makes three stateless turns (Chat Completions, a store:false response, the chain endpoint)
        for path, body in stateless:
            assert (await client.post(path, json=body)).status_code == 200, path
            await context.background.join()
        # Then nothing of them is stored, but each is in her ledger once: they spent tokens
        assert (await context.deps.chats.list_chats("alice", 10, None)).items == []
        usage = (await client.get("/api/ap/usage")).json()
        [row] = usage["items"]
        assert row["runs"] == 3 and row["inputTokens"] >= 30 and row["outputTokens"] >= 15  # 10 + 5 per model call
        spent = row["inputTokens"] + row["outputTokens"]
        assert usage["budget"]["spentTokens"] == spent and usage["budget"]["remainingTokens"] == 0
        # And her budget holds for them as for any turn
        path, body = stateless[0]
        refused = await client.post(path, json=body)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"


@pytest.mark.parametrize(("limited", "profile_reads"), [(False, 0), (True, 1)])
async def test_a_wire_turn_reads_the_profile_early_only_for_a_limited_user(limited: bool, profile_reads: int) -> None:
    # A UI-stream turn writes the client's chat before the turn is prepared, so its admission comes first; only a
    # user with a limit has a reservation to make, and only then is their profile read for the day's zone
    context = _context(**({"AGENT_USAGE_DAILY_TOKEN_BUDGET": 1000} if limited else {}))
    store = context.deps.memory_store
    reads: list[str] = []
    read_profile = store.get_profile

    async def counted(user_id: str) -> Any:
        reads.append(user_id)
        return await read_profile(user_id)

    store.get_profile = counted  # type: ignore[method-assign]
    body = {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    async with _client(context) as client:
        response = await client.post("/api/ui-stream", json=body)
        await context.background.join()
    assert response.status_code == 200 and '"finish"' in response.text
    assert len(reads) == profile_reads
    today = datetime.now(UTC).date().isoformat()
    assert context.deps.usage is not None
    [row] = await context.deps.usage.ledger.rows("alice", today, today)
    assert row.runs == 1


async def test_a_replayed_request_gives_its_reservation_back() -> None:
    context = _context(AGENT_USAGE_DAILY_TOKEN_BUDGET=1000, AGENT_USAGE_RESERVE_TOKENS=100)
    async with _client(context) as client:
        created = await client.post("/api/v1/conversations", json={"title": "t"})
        cid = created.json()["conversationId"]
        for _ in range(3):
            sent = await client.post(
                f"/api/v1/conversations/{cid}/chat", json={"message": "hi"}, headers={"X-Request-Id": "r"}
            )
            assert sent.status_code == 200
        await context.background.join()
    today = datetime.now(UTC).date().isoformat()
    assert context.deps.usage is not None
    assert (await context.deps.usage.budget.spent("alice", today))["tokens"] >= 10


class _Recorded(MemoryTable):
    """Records each write's kind and sort keys with the number of model calls made before it."""

    def __init__(self, llm: ScriptedLlm) -> None:
        super().__init__()
        self.llm = llm
        self.writes: list[tuple[int, str, list[str]]] = []

    async def update(self, key: Any, update: Any, condition: Any = None) -> Any:
        self.writes.append((len(self.llm.requests), "update", [str(key[SK])]))
        return await super().update(key, update, condition)

    async def put(self, item: Any, condition: Any = None) -> None:
        self.writes.append((len(self.llm.requests), "put", [str(item[SK])]))
        await super().put(item, condition)

    async def transact(self, ops: list[Any]) -> None:
        keys = [str((op.item if isinstance(op, Put) else op.key)[SK]) for op in ops]
        self.writes.append((len(self.llm.requests), "transact", keys))
        await super().transact(ops)


async def test_a_turn_in_a_chat_reserves_with_its_begin_and_a_refused_one_stores_nothing() -> None:
    # Given a budget of 20 tokens a day, turns that reserve 10 and spend 15, and a chat
    llm = ScriptedLlm()
    table = _Recorded(llm)
    settings = make_settings(
        AGENT_DEFAULT_TIMEZONE="UTC", AGENT_USAGE_DAILY_TOKEN_BUDGET=20, AGENT_USAGE_RESERVE_TOKENS=10
    )
    context = build_context(settings, table=table, llm=llm)
    today = datetime.now(UTC).date().isoformat()
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"]
        table.writes.clear()
        # When a turn runs in it
        sent = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "one"}, headers={"X-Request-Id": "r1"}
        )
        assert sent.status_code == 200
        answer = sent.json()
        await context.background.join()
        # Then its one write before the model call is the begin's transaction, the reservation one of its items
        before_model = [(kind, keys) for calls, kind, keys in table.writes if calls == 0]
        assert len(before_model) == 1 and before_model[0][0] == "transact", before_model
        assert "META" in before_model[0][1] and f"BUDGET#{today}" in before_model[0][1]
        # When a second turn takes the day to 30 (10 reserved at 15 spent: admitted), a third is refused
        assert (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "two"})).status_code == 200
        await context.background.join()
        stored = await context.deps.chats.messages_between(cid, None, None)
        runs, _ = await context.deps.turns.list_runs(cid, 10, None)
        spent = await table.get(budget_key("alice", today))
        calls = len(llm.requests)
        refused = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "three"})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"
        assert 0 < int(refused.headers["Retry-After"]) <= 86_400
        assert refused.json()["data"]["remaining"] == {"tokens": 0}
        # Then nothing of it is stored: no message, no run, the lease free, the day's spend unchanged
        assert await context.deps.chats.messages_between(cid, None, None) == stored
        assert (await context.deps.turns.list_runs(cid, 10, None))[0] == runs
        chat = await context.deps.chats.get_chat(cid, "alice")
        assert chat is not None and chat.active_run_id is None
        assert await table.get(budget_key("alice", today)) == spent and len(llm.requests) == calls
        # And the first request sent again gets its stored answer: a replay calls no model and reserves nothing
        replay = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "one"}, headers={"X-Request-Id": "r1"}
        )
        assert replay.status_code == 200 and replay.json() == answer
        assert await table.get(budget_key("alice", today)) == spent and len(llm.requests) == calls


def _reservation_writes(table: _Recorded, day: str) -> list[str]:
    """How each write before the model call that holds the day's BUDGET item wrote it (or the write's kind)."""
    return [kind for calls, kind, keys in table.writes if calls == 0 and f"BUDGET#{day}" in keys]


WIRE_TURNS = {
    "native, first message": ("/api/ap/query", {"message": "hi"}),
    "UI stream, new chat": (
        "/api/ui-stream",
        {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
    ),
    "Responses, input with history": (
        "/v1/responses",
        {
            "model": "main-agent",
            "input": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi, how can I help?"},
                {"role": "user", "content": "tell me more"},
            ],
        },
    ),
}


@pytest.mark.parametrize("wire", list(WIRE_TURNS))
async def test_a_turn_that_opens_a_chat_reserves_with_it(wire: str) -> None:
    # Given a user with a budget
    llm = ScriptedLlm()
    table = _Recorded(llm)
    context = build_context(
        make_settings(AGENT_DEFAULT_TIMEZONE="UTC", AGENT_USAGE_DAILY_TOKEN_BUDGET=1000), table=table, llm=llm
    )
    path, body = WIRE_TURNS[wire]
    async with _client(context) as client:
        # When a turn opens a new chat
        response = await client.post(path, json=body)
        assert response.status_code == 200, response.text
        await context.background.join()
        # Then its reservation is one item of the transaction opening the chat: no write of its own
        today = datetime.now(UTC).date().isoformat()
        assert _reservation_writes(table, today) == ["transact"], table.writes
        if path == "/v1/responses":
            # And a response continuing it (nothing written before its begin) reserves with its begin
            table.writes.clear()
            llm.requests.clear()
            follow = {"model": "main-agent", "input": "and then?", "previous_response_id": response.json()["id"]}
            assert (await client.post(path, json=follow)).status_code == 200
            begin = [keys for calls, kind, keys in table.writes if calls == 0 and "META" in keys]
            assert _reservation_writes(table, today) == ["transact"] and f"BUDGET#{today}" in begin[0]


async def test_a_ui_stream_turn_in_its_chat_is_refused_by_its_begin_storing_nothing() -> None:
    # Given a budget the first turn of a UI chat spends (10, reserving 10; the turn spends 15)
    llm = ScriptedLlm()
    table = _Recorded(llm)
    settings = make_settings(
        AGENT_DEFAULT_TIMEZONE="UTC", AGENT_USAGE_DAILY_TOKEN_BUDGET=10, AGENT_USAGE_RESERVE_TOKENS=10
    )
    context = build_context(settings, table=table, llm=llm)

    def body(n: int) -> dict[str, Any]:
        return {"id": "c1", "messages": [{"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}

    async with _client(context) as client:
        assert '"finish"' in (await client.post("/api/ui-stream", json=body(1))).text
        await context.background.join()
        [chat] = (await context.deps.chats.list_chats("alice", 10, None)).items
        stored = await context.deps.chats.messages_between(chat.chat_id, None, None)
        table.writes.clear()
        # When the client sends the next message in that chat
        refused = await client.post("/api/ui-stream", json=body(2))
    # Then the stream ends with the budget's error part, and the refusal came from the begin's transaction: the
    # one write tried, which stored nothing
    assert "[budget_exceeded]" in refused.text and refused.headers["Retry-After"]
    assert [kind for _, kind, _ in table.writes] == ["transact"]
    assert await context.deps.chats.messages_between(chat.chat_id, None, None) == stored
    reopened = await context.deps.chats.get_chat(chat.chat_id, "alice")
    assert reopened is not None and reopened.active_run_id is None


async def test_the_chain_endpoint_is_held_to_the_budget_on_the_apps_table() -> None:
    # Given a budget one stateless turn spends (its turn is stored in a throw-away store, its budget is not)
    context = _context(AGENT_USAGE_DAILY_TOKEN_BUDGET=10, AGENT_USAGE_RESERVE_TOKENS=10)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    async with _client(context) as client:
        first = events_in((await client.post("/api/chat/stream", json=body)).text)
        assert first[0]["type"] == "request.query" and first[-1].get("code") != "budget_exceeded"  # it ran
        await context.background.join()
        # When another comes, Then it is refused: the reservation went to the app's table
        [event] = events_in((await client.post("/api/chat/stream", json=body)).text)
        assert (event["type"], event["code"]) == ("run.error", "budget_exceeded")
    today = datetime.now(UTC).date().isoformat()
    assert context.deps.usage is not None
    assert (await context.deps.usage.budget.spent("alice", today))["tokens"] >= 10


class _MarkerReads(MemoryTable):
    """A memory table that counts the reads of request markers (REQ# items)."""

    def __init__(self) -> None:
        super().__init__()
        self.marker_reads = 0

    async def get(self, key: Key) -> Item | None:
        self.marker_reads += str(key[SK]).startswith("REQ#")
        return await super().get(key)


async def test_a_repeated_request_id_is_answered_from_its_run_even_over_budget() -> None:
    # Given a budget of 20 tokens a day (a turn spends 15) and a user who asked two questions with requestIds
    table = _MarkerReads()
    context = _context(table, AGENT_USAGE_DAILY_TOKEN_BUDGET=20, AGENT_USAGE_RESERVE_TOKENS=10)
    async with _client(context) as client:
        first = await client.post("/api/ap/query", json={"message": "first", "requestId": "q-1"})
        [done] = [e for e in events_in(first.text) if e["type"] == "run.complete"]
        chatted = await _chat(client, "second", request_id="c-1")
        assert chatted.status_code == 200
        await context.background.join()
        # (an admitted turn never reads a request marker: the lookup is for a refusal only)
        assert table.marker_reads == 0
        # When the user, now over budget, sends each request again (the first one opened its chat)
        again = await client.post("/api/ap/query", json={"message": "first", "requestId": "q-1"})
        cid = chatted.request.url.path.split("/")[-2]
        repeated = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "second"}, headers={"X-Request-Id": "c-1"}
        )
        # Then each is answered with what its run stored: no refusal, no model call
        replayed = events_in(again.text)
        assert replayed[-1]["type"] == "run.complete" and replayed[-1]["requestId"] == done["requestId"] == "q-1"
        assert not [e for e in replayed if e["type"] == "run.error"]
        assert repeated.status_code == 200 and repeated.json() == chatted.json()
        # While a request never answered is refused, on the stream and on the buffered route
        new = events_in((await client.post("/api/ap/query", json={"message": "x", "requestId": "q-2"})).text)
        assert [(e["type"], e["code"]) for e in new] == [("run.error", "budget_exceeded")]
        refused = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "third"}, headers={"X-Request-Id": "c-2"}
        )
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"
        await context.background.join()
        usage = (await client.get("/api/ap/usage")).json()
        assert usage["totals"]["runs"] == 2


class _Atomic(DynamoTable):
    """moto's in-process DynamoDB is not thread-safe; DynamoDB applies each request atomically: so does this."""

    _lock = threading.Lock()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return getattr(self.client, method)(*args, **kwargs)

        return await asyncio.to_thread(locked)


@pytest.fixture
def table_64(any_table: Table) -> Table:
    if isinstance(any_table, DynamoTable):
        return _Atomic(any_table.table_name, lambda: any_table.client)
    return any_table


async def test_64_concurrent_turns_overshoot_the_budget_by_at_most_one_reservation(table_64: Table) -> None:
    # Given a budget of 100 tokens, turns that reserve 40 and spend 15 (the scripted model), 64 at once
    budget, reserve = 100, 40
    context = _context(table_64, AGENT_USAGE_DAILY_TOKEN_BUDGET=budget, AGENT_USAGE_RESERVE_TOKENS=reserve)
    async with _client(context) as client:
        chats = []
        for _ in range(64):
            chats.append((await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"])
        answers = await asyncio.gather(
            *(client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"}) for cid in chats)
        )
        await context.background.join()
    statuses = [a.status_code for a in answers]
    # Then some ran, the rest were refused with 429, and nothing else happened
    assert set(statuses) <= {200, 429} and 200 in statuses and 429 in statuses
    # And the day's spend (all settled) passes the budget by at most one reservation
    assert context.deps.usage is not None
    today = datetime.now(UTC).date().isoformat()
    spent = await context.deps.usage.budget.spent("alice", today)
    ran = statuses.count(200)
    assert spent["tokens"] == 15 * ran
    assert spent["tokens"] <= budget + reserve
    [row] = await context.deps.usage.ledger.rows("alice", today, today)
    assert row.runs == ran


async def test_the_refusal_names_the_budget_that_is_spent(any_table: Table) -> None:
    meter = _meter(any_table, AGENT_USAGE_DAILY_COST_BUDGET_USD=0.0001)  # 100 micro-USD
    from agent_core.domain.models import Run

    run = Run(run_id="r1", chat_id="c", user_id="u1", request_id="q", model="gpt-4.1-mini", started_at=0)
    at_ms = int(datetime(2026, 11, 26, 12, tzinfo=UTC).timestamp() * 1000)
    reservation = await meter.admit(run, at_ms, UTC_ZONE)
    assert reservation.cost_micros == 6554  # 4096 tokens at the output price, 1.6 per million, rounded up
    with pytest.raises(BudgetExceeded) as refused:
        await meter.admit(run, at_ms, UTC_ZONE)
    assert refused.value.retry_after_s == 12 * 3600
    assert refused.value.data == {
        "limit": "daily_budget",
        "remaining": {"costUsd": 0.0},
        "retryAfterS": 12 * 3600,
        "day": DAY,
    }
    # Released, the budget admits again
    await meter.release(reservation)
    assert (await any_table.get(budget_key("u1", DAY)) or {})["costMicros"] == 0
    await meter.admit(run, at_ms, UTC_ZONE)


# ----- jobs, under the user they serve -----


async def test_a_jobs_model_use_is_counted_once_under_its_user_however_often_it_is_delivered() -> None:
    from agent_core.domain.jobs import SessionSummaryJob
    from agent_core.jobs.handlers import JobRunner
    from agent_core.llm.base import LlmRequest, complete_text

    class Spending:
        async def stream(self, request: LlmRequest) -> AsyncIterator[Any]:
            from agent_core.llm.base import LlmDelta

            yield LlmDelta(content="a summary")
            yield LlmDelta(usage=Usage(prompt_tokens=300, completion_tokens=30))

    async def summarise(deps: Any, job: Any) -> bool:
        await complete_text(deps.llm, LlmRequest(model="gpt-4.1-mini", purpose="summarize", messages=[]))
        return True

    context = build_context(make_settings(AGENT_DEFAULT_TIMEZONE="UTC"), table=MemoryTable(), llm=Spending())
    runner = JobRunner({SessionSummaryJob: summarise}, context.deps)
    job = SessionSummaryJob(chat_id="c1", user_id="alice", session_id="s1", started_at=0, ended_at=1)
    # When the same job is delivered three times (retries, redeliveries carried by other batches)
    for batch in ("b1", "b2", "b2"):
        assert await runner(job.model_copy(update={"job_run_id": batch})) is True
    # Then its tokens are in alice's ledger once, as one job and no run
    assert context.deps.usage is not None
    today = datetime.now(UTC).date().isoformat()
    [row] = await context.deps.usage.ledger.rows("alice", today, today)
    assert (row.jobs, row.runs, row.input_tokens, row.output_tokens) == (1, 0, 300, 30)
    # And another job of hers is counted besides
    await runner(job.model_copy(update={"session_id": "s2"}))
    [row] = await context.deps.usage.ledger.rows("alice", today, today)
    assert (row.jobs, row.input_tokens) == (2, 600)


# ----- ops: the command line -----


def test_the_usage_and_limits_commands_read_and_set_the_embedded_store(tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys

    from agent_core.store.embedded import open_embedded

    # Given a run of alice's recorded in the local server's database
    settings = make_settings(AGENT_STORAGE="embedded", AGENT_DATA_DIR=str(tmp_path))
    meter = UsageMeter(open_embedded(settings).table, settings)
    asyncio.run(meter.ledger.record(_record("run:1", user="alice", runs=1)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    env |= {"AGENT_STORAGE": "embedded", "AGENT_DATA_DIR": str(tmp_path), "AGENT_DEFAULT_TIMEZONE": "UTC"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agent_core.cli", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)

    # When ops read her usage for that day
    out = cli("usage", "--user", "alice", "--from", DAY, "--to", DAY)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [(r["day"], r["runs"], r["inputTokens"]) for r in report["items"]] == [(DAY, 1, 100)]
    assert report["budget"]["dailyTokens"] is None
    # And give her a budget of her own
    out = cli("limits", "--user", "alice", "--daily-tokens", "5000", "--requests-per-minute", "3")
    assert out.returncode == 0, out.stderr
    budget = json.loads(out.stdout)["budget"]
    assert (budget["dailyTokens"], budget["requestsPerMinute"], budget["dailyCostUsd"]) == (5000, 3, None)
    # Then the app reads it as hers
    assert asyncio.run(UsageMeter(open_embedded(settings).table, settings).limits.get("alice")).daily_tokens == 5000
    # And a malformed range is refused with a reason
    out = cli("usage", "--user", "alice", "--from", "yesterday")
    assert out.returncode == 2 and "not a date" in out.stderr
