"""Long-term memory records (L4) through the API, on the in-memory table, moto and SQLite: import, the jobs
that make records (idempotent), hybrid search with its budget, time filter and per-user isolation, erasure
with the chat and the profile, and what a turn's prompt gets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import MemoryRecordsJob
from agent_core.llm.tokens import estimate_text
from agent_core.memory.recall import HEADER
from agent_core.store.memory_records import RecordTable, mark_key
from agent_core.store.table import Table
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings

ALICE = {"X-User-Id": "alice"}
BOB = {"X-User-Id": "bob"}

TRIP = [
    ("assistant", "Welcome back! What are you planning?", "2024-03-01T09:00:00Z"),
    ("user", "I am planning a hiking trip to Patagonia in November.", "2024-03-01T09:01:00Z"),
    ("user", "My sister Clara is coming along with her dog.", "2024-03-01T09:02:00Z"),
    ("assistant", "Patagonia in November is lovely: pack layers for the wind.", "2024-03-01T09:03:00Z"),
    ("user", "We will fly into El Calafate and rent a car.", "2024-03-01T09:04:00Z"),
    ("assistant", "Good plan; book the car early.", "2024-03-01T09:05:00Z"),
]
PIANO = [
    ("user", "I started piano lessons with a teacher called Mr Okafor.", "2024-05-10T18:00:00Z"),
    ("assistant", "Lovely! Which pieces are you learning?", "2024-05-10T18:01:00Z"),
    ("user", "Mostly Chopin nocturnes, slowly.", "2024-05-10T18:02:00Z"),
    ("assistant", "Chopin nocturnes reward patience.", "2024-05-10T18:03:00Z"),
]


def _body(messages: list[tuple[str, str, str]], title: str = "") -> dict[str, Any]:
    return {"title": title, "messages": [{"role": r, "content": c, "createdAt": t} for r, c, t in messages]}


@pytest.fixture
def context(any_table: Table) -> AppContext:
    return build_context(make_settings(), table=any_table, audit=lambda line: None)


@pytest.fixture
async def client(context: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build_app(*routes.local, context=context))
    async with httpx.AsyncClient(transport=transport, base_url="http://local") as c:
        yield c


async def _import(client: httpx.AsyncClient, context: AppContext, messages: list[tuple[str, str, str]], who=ALICE):
    answer = await client.post("/api/ap/chats/import", json=_body(messages), headers=who)
    assert answer.status_code == 201, answer.text
    await context.background.join()  # the session summary job, then the records job it queues
    await context.background.join()
    return answer.json()


async def _search(client: httpx.AsyncClient, who: dict[str, str] = ALICE, **body: Any) -> dict[str, Any]:
    answer = await client.post("/api/ap/memory/search", json=body, headers=who)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_an_import_keeps_order_and_times_and_becomes_searchable(
    client: httpx.AsyncClient, context: AppContext
) -> None:
    out = await _import(client, context, TRIP)
    assert len(out["messageIds"]) == len(TRIP) and out["messageIds"] == sorted(out["messageIds"])
    listed = await client.get(f"/api/v1/conversations/{out['chatId']}/messages", headers=ALICE)
    items = listed.json()["items"]
    # Starts with the assistant, two user messages in a row: stored as given, each with its own time.
    assert [(m["role"], m["content"]) for m in items] == [(r.upper(), c) for r, c, _ in TRIP]
    assert [m["createdAt"] for m in items] == [t.replace("Z", ".000Z") for _, _, t in TRIP]
    found = await _search(client, query="Who is coming on the Patagonia trip?")
    best = found["records"][0]
    assert best["kind"] == "message" and "Clara" in best["text"] and best["chatId"] == out["chatId"]
    assert 1 <= len(best["messageIds"]) <= 4 and set(best["messageIds"]) <= set(out["messageIds"])
    assert best["at"] == 1709283600000 + 60_000 * out["messageIds"].index(best["messageIds"][0])
    assert context.deps.memory is not None
    stored = [s.record for s in await context.deps.memory.records.load("alice")]
    sessions = [r for r in stored if r.kind == "session"]  # the session summary is a record too, citing it all
    assert len(sessions) == 1 and sessions[0].message_ids == out["messageIds"]


async def test_search_never_returns_another_users_records(client: httpx.AsyncClient, context: AppContext) -> None:
    await _import(client, context, TRIP)
    assert (await _search(client, BOB, query="Patagonia hiking trip Clara"))["records"] == []
    await _import(client, context, PIANO, who=BOB)
    for record in (await _search(client, BOB, query="Patagonia hiking trip Clara piano", limit=100))["records"]:
        assert "Patagonia" not in record["text"]
    assert all("piano" not in r["text"] for r in (await _search(client, query="piano Chopin", limit=100))["records"])


async def test_records_stop_before_the_token_budget_and_honour_the_time_range(
    client: httpx.AsyncClient, context: AppContext
) -> None:
    await _import(client, context, TRIP)
    await _import(client, context, PIANO)
    everything = await _search(client, query="Patagonia piano Chopin trip car", limit=100)
    assert len(everything["records"]) >= 3
    first = estimate_text(everything["records"][0]["text"])
    budget = first + estimate_text(everything["records"][1]["text"]) - 1  # room for the first only
    tight = await _search(client, query="Patagonia piano Chopin trip car", limit=100, maxTokens=budget)
    assert [r["text"] for r in tight["records"]] == [everything["records"][0]["text"]]
    assert tight["tokens"] == first <= budget
    may = await _search(client, query="Patagonia piano Chopin trip car", start="2024-05-01", end="2024-06-01")
    assert may["records"] and all("Patagonia" not in r["text"] for r in may["records"])
    assert all(1714521600000 <= r["at"] < 1717200000000 for r in may["records"])


async def test_a_retried_records_job_writes_each_record_once(client: httpx.AsyncClient, context: AppContext) -> None:
    out = await _import(client, context, TRIP)
    memory = context.deps.memory
    assert memory is not None
    before = await memory.records.load("alice")
    version = await memory.records.version("alice")
    await context.jobs(MemoryRecordsJob(chat_id=out["chatId"], user_id="alice"))  # a redelivered message
    # A job that wrote its records and then failed before moving the chat's mark: run again from scratch.
    assert isinstance(memory.records, RecordTable)
    await memory.records.table.delete(mark_key(out["chatId"]))
    await context.jobs(MemoryRecordsJob(chat_id=out["chatId"], user_id="alice"))
    after = await memory.records.load("alice")
    assert sorted(s.record.record_id for s in after) == sorted(s.record.record_id for s in before)
    assert await memory.records.version("alice") == version  # nothing was written again
    covered = {m for s in after if s.record.kind == "message" for m in s.record.message_ids}
    assert covered == set(out["messageIds"])  # every stored message is in a window


async def test_records_go_with_their_chat_and_all_with_the_profile(
    client: httpx.AsyncClient, context: AppContext
) -> None:
    trip = await _import(client, context, TRIP)
    await _import(client, context, PIANO)
    assert (await client.delete(f"/api/v1/conversations/{trip['chatId']}", headers=ALICE)).status_code == 204
    left = await _search(client, query="Patagonia trip Clara piano Chopin", limit=100)
    assert left["records"] and all(r["chatId"] != trip["chatId"] for r in left["records"])
    assert (await client.delete("/api/ap/profile", headers=ALICE)).status_code == 204
    assert (await _search(client, query="Patagonia trip Clara piano Chopin", limit=100))["records"] == []
    memory = context.deps.memory
    assert memory is not None and await memory.records.load("alice") == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"messages": [{"role": "user", "content": "x", "createdAt": "2024-01-01T00:00:00Z"}] * 2001},
            422,
            "too_many_messages",
        ),
        ({"messages": []}, 422, "no_messages"),
        (
            {
                "messages": [
                    {"role": "user", "content": "b", "createdAt": "2024-01-02T00:00:00Z"},
                    {"role": "assistant", "content": "a", "createdAt": "2024-01-01T00:00:00Z"},
                ]
            },
            422,
            "messages_out_of_order",
        ),
        ({"messages": [{"role": "user", "content": "  ", "createdAt": "2024-01-01T00:00:00Z"}]}, 422, "blank_message"),
        (
            {"messages": [{"role": "user", "content": "x", "createdAt": "1969-12-31T23:59:59Z"}]},
            422,
            "invalid_created_at",
        ),
        (
            {"messages": [{"role": "user", "content": "x" * 40000, "createdAt": "2024-01-01T00:00:00Z"}]},
            413,
            "message_too_large",
        ),
        (
            {"messages": [{"role": "system", "content": "x", "createdAt": "2024-01-01T00:00:00Z"}]},
            422,
            "invalid_request",
        ),
    ],
)
async def test_an_import_out_of_bounds_is_refused_before_anything_is_written(
    client: httpx.AsyncClient, context: AppContext, body: dict[str, Any], status: int, code: str
) -> None:
    answer = await client.post("/api/ap/chats/import", json=body, headers=ALICE)
    assert answer.status_code == status and answer.json()["error"]["code"] == code
    assert (await client.get("/api/v1/conversations", headers=ALICE)).json()["items"] == []


async def test_a_turn_remembers_what_is_relevant_and_a_greeting_costs_nothing(any_table: Table) -> None:
    llm = ScriptedLlm()
    context = build_context(make_settings(), table=any_table, llm=llm, audit=lambda line: None)
    transport = httpx.ASGITransport(app=build_app(*routes.local, context=context))
    async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
        offline = build_context(make_settings(), table=any_table, audit=lambda line: None)
        off_transport = httpx.ASGITransport(app=build_app(*routes.local, context=offline))
        async with httpx.AsyncClient(transport=off_transport, base_url="http://local") as importer:
            await _import(importer, offline, TRIP)
        answer = await client.post("/api/v1/conversations", json={}, headers=ALICE)
        cid = answer.json()["conversationId"]
        await client.post(
            f"/api/v1/conversations/{cid}/chat",
            json={"message": "Welcome back! Nice to see you again today."},
            headers=ALICE,
        )
        await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "Where do we fly into for Patagonia?"}, headers=ALICE
        )
    greeting, question = llm.requests[-2], llm.requests[-1]
    assert not any(HEADER in str(m.get("content")) for m in greeting.messages)
    remembered = [str(m["content"]) for m in question.messages if HEADER in str(m.get("content"))]
    assert len(remembered) == 1 and "El Calafate" in remembered[0] and "[2024-03-01]" in remembered[0]
    assert estimate_text(remembered[0]) <= context.settings.memory_recall_tokens


async def test_facts_the_user_states_reach_the_profile_and_become_records(
    client: httpx.AsyncClient, context: AppContext
) -> None:
    said = [
        ("user", "I'm allergic to peanuts, so no satay for me please.", "2024-04-02T12:00:00Z"),
        ("assistant", "Noted: no peanuts.", "2024-04-02T12:01:00Z"),
        ("user", "My favourite city is Lisbon and I love fado music.", "2024-04-02T12:02:00Z"),
        ("assistant", "Lisbon is wonderful for fado.", "2024-04-02T12:03:00Z"),
    ]
    await _import(client, context, said)
    await context.background.join()  # the profile job, queued by the session summary
    profile = (await client.get("/api/ap/profile", headers=ALICE)).json()
    facts = {(f["aspect"], f["key"]): f["value"] for f in profile["facts"]}
    assert facts[("constraints", "allergy to peanuts")] == "allergic to peanuts"
    assert facts[("preferences", "favourite city")] == "Lisbon"
    assert facts[("interests", "fado music")] == "I love fado music"
    found = await _search(client, query="what food allergy does the user have? peanuts", limit=50)
    assert any(r["kind"] == "fact" and "allergic to peanuts" in r["text"] for r in found["records"])


async def test_search_memory_and_search_chat_history_with_a_query_use_the_records(
    client: httpx.AsyncClient, context: AppContext
) -> None:
    from datetime import UTC, datetime

    from agent_core.tools.base import ToolContext
    from agent_core.tools.builtin.memory_tools import (
        HistoryArgs,
        MemorySearchArgs,
        SearchChatHistoryTool,
        SearchMemoryTool,
    )

    await _import(client, context, TRIP)
    await _import(client, context, PIANO)
    tool_context = ToolContext(
        request_id="r",
        conversation_id="c",
        user_id="alice",
        settings=context.settings,
        timezone="UTC",
        now=datetime(2024, 6, 1, tzinfo=UTC),
        memory=context.deps.memory_store,
        records=context.deps.memory,
    )
    found = await SearchMemoryTool().run(MemorySearchArgs(query="which car rental in El Calafate"), tool_context)
    assert found["records"].startswith("- [2024-03-01] ") and "El Calafate" in found["records"]
    may = await SearchMemoryTool().run(
        MemorySearchArgs(query="El Calafate car piano", start="2024-05-01", end="2024-05-31"), tool_context
    )
    assert "Chopin" in may["records"] and "Calafate" not in may["records"]
    history = await SearchChatHistoryTool().run(
        HistoryArgs(start="2024-03-01", end="2024-03-02", query="Clara dog"), tool_context
    )
    assert "Clara" in history["records"] and "[2024-03-01]" in history["records"]
    nothing = await SearchMemoryTool().run(MemorySearchArgs(query="quantum chromodynamics"), tool_context)
    assert nothing["records"] == "(no records)"
