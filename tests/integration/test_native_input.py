"""Bad input on the native routes is refused, never silently ignored: X-Agent-Now on a dev server without the
clock override, an empty chatId, unknown top-level fields. The OpenAI wires keep their tolerance."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings

NOW = {"X-Agent-Now": "2026-01-07T10:00:00+08:00"}


def _context(**settings: Any) -> AppContext:
    return build_context(make_settings(**settings), table=MemoryTable(), audit=lambda line: None)


def _client(ctx: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": "alice"}, timeout=30
    )


def _error(answer: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = answer.json()["error"]
    return error


# ----- X-Agent-Now -----


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/ap/query", {"message": "hello"}),
        ("POST", "/api/dev/jobs/idle-sessions", None),
        ("POST", "/v1/responses", {"model": "main-agent", "input": "hello"}),
    ],
    ids=["query", "dev-job", "responses"],
)
async def test_x_agent_now_on_a_dev_server_without_the_override_is_refused(
    method: str, path: str, body: dict[str, Any] | None
) -> None:
    ctx = _context(AGENT_STAGE="dev")
    async with _client(ctx) as client:
        answer = await client.request(method, path, json=body, headers=NOW)
    assert answer.status_code == 400
    error = _error(answer)
    assert error["code"] == "clock_override_disabled" and error["param"] == "X-Agent-Now"
    assert "AGENT_ALLOW_CLOCK_OVERRIDE" in error["message"]
    assert (await ctx.deps.chats.list_chats("alice", 10, None)).items == []  # refused before any work


async def test_x_agent_now_is_honoured_with_the_override_and_ignored_outside_dev() -> None:
    dev = _context(AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true")
    prod = _context()
    for ctx, honoured in ((dev, True), (prod, False)):
        async with _client(ctx) as client:
            answer = await client.post("/api/ap/query", json={"message": "hello"}, headers=NOW)
        assert answer.status_code == 200
        [chat] = (await ctx.deps.chats.list_chats("alice", 10, None)).items
        assert (chat.created_at == 1767751200000) is honoured  # 2026-01-07T02:00:00Z


# ----- chatId -----


async def test_an_empty_chat_id_is_refused_as_the_replay_query_refuses_it() -> None:
    ctx = _context()
    async with _client(ctx) as client:
        query = await client.post("/api/ap/query", json={"message": "hello", "chatId": ""})
        replay = await client.get("/api/ap/chat", params={"chatId": ""})
    for answer in (query, replay):
        assert answer.status_code == 422 and _error(answer)["param"] == "chatId"
    assert (await ctx.deps.chats.list_chats("alice", 10, None)).items == []


# ----- unknown fields -----


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/ap/query", {"message": "hello", "chatid": "c_1"}, "chatid"),
        ("/api/ap/cancel", {"runId": "r_1", "run": "x"}, "run"),
        ("/api/ap/submit", {"runId": "r_1", "toolId": "t_1", "param": {}}, "param"),
        ("/api/v1/conversations", {"title": "x", "name": "y"}, "name"),
        ("/api/chat/stream", {"messages": [{"role": "user", "content": "hi"}], "agent": "x"}, "agent"),
    ],
    ids=["query", "cancel", "submit", "conversations", "chat-stream"],
)
async def test_an_unknown_top_level_field_is_refused_naming_it(path: str, body: dict[str, Any], field: str) -> None:
    ctx = _context()
    async with _client(ctx) as client:
        answer = await client.post(path, json=body)
    assert answer.status_code == 422
    error = _error(answer)
    assert (error["code"], error["param"]) == ("unknown_field", field) and field in error["message"]
    assert (await ctx.deps.chats.list_chats("alice", 10, None)).items == []


async def test_unknown_fields_on_the_other_native_bodies() -> None:
    ctx = _context()
    async with _client(ctx) as client:
        created = (await client.post("/api/v1/conversations", json={"title": "x"})).json()
        chat = await client.post(
            f"/api/v1/conversations/{created['conversationId']}/chat", json={"message": "hi", "requestID": "a"}
        )
        profile = await client.patch("/api/ap/profile", json={"timeZone": "Europe/Paris"})
    assert (_error(chat)["code"], _error(chat)["param"]) == ("unknown_field", "requestID")
    assert (_error(profile)["code"], _error(profile)["param"]) == ("unknown_field", "timeZone")


async def test_snake_case_names_of_known_fields_are_still_accepted() -> None:
    ctx = _context()
    async with _client(ctx) as client:
        answer = await client.post("/api/ap/query", json={"message": "hello", "request_id": "r-1"})
    assert answer.status_code == 200


async def test_openai_wires_keep_tolerating_extra_fields() -> None:
    ctx = _context()
    async with _client(ctx) as client:
        responses = await client.post(
            "/v1/responses", json={"model": "main-agent", "input": "hello", "some_future_option": 1}
        )
        completions = await client.post(
            "/v1/chat/completions",
            json={"model": "main-agent", "messages": [{"role": "user", "content": "hi"}], "some_future_option": 1},
        )
    assert responses.status_code == 200, responses.text
    assert completions.status_code == 200, completions.text
