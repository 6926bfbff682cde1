"""The user's time zone: set on the profile (PATCH) or named per request; used by time queries, sessions
(day markers) and daily summaries instead of AGENT_DEFAULT_TIMEZONE (Asia/Shanghai here)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import DailySummary, Profile, ProfileFact
from agent_core.jobs.daily import run_daily_summary
from agent_core.jobs.session_summaries import run_idle_sessions
from agent_core.store import items as it
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.sse import events_in

# 03:00 UTC on Jan 8: 11:00 on the 8th in Shanghai, 22:00 on the 7th in New York.
EVENING_IN_NEW_YORK = datetime(2026, 1, 8, 3, 0, tzinfo=UTC)


def _context(table: MemoryTable | None = None) -> AppContext:
    settings = make_settings(
        AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true", AGENT_DEFAULT_TIMEZONE="Asia/Shanghai"
    )
    return build_context(settings, table=table or MemoryTable(), llm=ScriptedLlm(), audit=lambda _: None)


def _client(context: AppContext, user: str = "nyc") -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": user})


async def _ask(
    client: httpx.AsyncClient, message: str, at: datetime, headers: dict[str, str] | None = None, **body: Any
) -> list[dict[str, Any]]:
    response = await client.post(
        "/api/ap/query", json={"message": message, **body}, headers={"X-Agent-Now": at.isoformat(), **(headers or {})}
    )
    assert response.status_code == 200, response.text
    return events_in(response.text)


def _route(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "run.route")


async def test_patch_profile_sets_a_valid_zone_keeps_the_facts_and_refuses_other_names() -> None:
    context = _context()
    fact = ProfileFact(aspect="interests", key="travel", value="Japan", source_date="2026-01-07")
    await context.deps.memory_store.put_profile(Profile(user_id="nyc", facts=[fact]))
    async with _client(context) as client:
        assert (await client.get("/api/ap/profile")).json()["timezone"] == "Asia/Shanghai"  # the default
        changed = await client.patch("/api/ap/profile", json={"timezone": "Europe/Paris"})
        assert changed.status_code == 200 and changed.json()["timezone"] == "Europe/Paris"
        assert changed.json()["facts"][0]["value"] == "Japan", "setting the zone keeps what is known"
        for bad in ("Mars/Olympus", "../../etc/passwd", "America", "", "X" * 80):  # America: a folder of zones
            refused = await client.patch("/api/ap/profile", json={"timezone": bad})
            assert refused.status_code == 400, bad
            assert refused.json()["error"]["code"] == "invalid_timezone"
            assert refused.json()["error"]["param"] == "timezone"
        assert (await client.get("/api/ap/profile")).json()["timezone"] == "Europe/Paris"
    async with _client(context, "someone-else") as other:
        assert (await other.get("/api/ap/profile")).json()["timezone"] == "Asia/Shanghai"


async def test_a_profile_zone_drives_day_markers_sessions_daily_summaries_and_time_queries() -> None:
    table = MemoryTable()
    context = _context(table)
    async with _client(context) as client:
        await client.patch("/api/ap/profile", json={"timezone": "America/New_York"})
        chat_id = (await _ask(client, "I want to visit Kyoto in April with my family", EVENING_IN_NEW_YORK))[0][
            "chatId"
        ]
        await _ask(client, "our budget is about 8000 CNY for the week", EVENING_IN_NEW_YORK, chatId=chat_id)
        # The turn marked New York's Jan 7 (Shanghai's date would be Jan 8).
        assert await table.get(it.daymark_key("nyc", "2026-01-07")) is not None
        assert await table.get(it.daymark_key("nyc", "2026-01-08")) is None
        await run_idle_sessions(context.deps, EVENING_IN_NEW_YORK + timedelta(hours=1))
        await context.background.join()
        sessions = await context.deps.memory_store.list_sessions(chat_id)
        assert [s.local_date for s in sessions] == ["2026-01-07"]
        # New York's Jan 7 closes at 05:00 UTC on Jan 8: the 05:30 pass summarises it.
        report = await run_daily_summary(context.deps, datetime(2026, 1, 8, 5, 30, tzinfo=UTC))
        assert report.enqueued == 1
        await context.background.join()
        assert [d.date for d in await context.deps.memory_store.daily_range("nyc", "2026-01-01", "2026-01-31")] == [
            "2026-01-07"
        ]
        # The next evening in New York, "yesterday" is Jan 7 there.
        events = await _ask(client, "what did we talk about yesterday?", EVENING_IN_NEW_YORK + timedelta(days=1))
    assert _route(events)["reason"] == "history of 2026-01-07"


async def test_a_request_names_its_zone_in_the_body_or_the_x_timezone_header() -> None:
    context = _context()
    await context.deps.memory_store.put_daily(
        DailySummary(user_id="nyc", date="2026-01-07", summary="Kyoto plans.", key_topics=["Kyoto"], updated_at=0)
    )
    later = EVENING_IN_NEW_YORK + timedelta(days=1)  # Jan 9 in Shanghai, Jan 8 in New York
    async with _client(context) as client:
        by_default = await _ask(client, "what did we talk about yesterday?", later)
        by_body = await _ask(client, "what did we talk about yesterday?", later, timezone="America/New_York")
        by_header = await _ask(
            client, "what did we talk about yesterday?", later, headers={"X-Timezone": "America/New_York"}
        )
    assert _route(by_default)["reason"] == "history of 2026-01-08"
    assert _route(by_body)["reason"] == _route(by_header)["reason"] == "history of 2026-01-07"


@pytest.mark.parametrize(
    ("path", "body", "headers", "param"),
    [
        ("/api/ap/query", {"message": "hi", "timezone": "Nowhere/City"}, {}, "timezone"),
        ("/api/ap/query", {"message": "hi"}, {"X-Timezone": "UTC+8"}, "X-Timezone"),
        ("/api/v1/conversations/{chat}/chat", {"message": "hi", "timezone": "Atlantis"}, {}, "timezone"),
    ],
)
async def test_an_invalid_request_zone_is_400_before_any_work(
    path: str, body: dict[str, Any], headers: dict[str, str], param: str
) -> None:
    table = MemoryTable()
    context = _context(table)
    async with _client(context) as client:
        chat = (await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"]
        before = table.item_count()
        response = await client.post(path.format(chat=chat), json=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_timezone" and response.json()["error"]["param"] == param
    assert table.item_count() == before, "nothing stored"


async def test_a_browser_may_patch_the_profile_and_send_x_timezone_across_origins() -> None:
    settings = make_settings(AGENT_CORS_ORIGINS="https://app.example")
    context = build_context(settings, table=MemoryTable(), llm=ScriptedLlm(), audit=lambda _: None)
    async with _client(context) as client:
        preflight = await client.options(
            "/api/ap/profile",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "PATCH",
                "Access-Control-Request-Headers": "content-type, x-timezone",
            },
        )
    assert preflight.status_code == 200
    assert "PATCH" in preflight.headers["access-control-allow-methods"]
    assert "x-timezone" in preflight.headers["access-control-allow-headers"].lower()


async def test_a_browser_may_resume_a_stream_across_origins_with_last_event_id() -> None:
    # The playground served from another origin resumes a dropped stream with a Last-Event-ID header
    settings = make_settings(AGENT_CORS_ORIGINS="https://app.example")
    context = build_context(settings, table=MemoryTable(), llm=ScriptedLlm(), audit=lambda _: None)
    async with _client(context) as client:
        preflight = await client.options(
            "/api/ap/runs/r1/events",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "authorization, last-event-id",
            },
        )
    assert preflight.status_code == 200
    assert "last-event-id" in preflight.headers["access-control-allow-headers"].lower()


async def test_the_time_tool_defaults_to_the_zone_the_request_names() -> None:
    context = _context()
    async with _client(context) as client:
        events = await _ask(client, "what time is it?", EVENING_IN_NEW_YORK, headers={"X-Timezone": "Europe/Paris"})
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["result"]["timezone"] == "Europe/Paris"
    time = result["result"]["time"]  # the turn's clock starts at X-Agent-Now (03:00 UTC) and runs on
    assert time.startswith("2026-01-08T04:") and time.endswith("+01:00")
