"""A retried first message (same requestId, no chatId) never opens a second chat: on the in-memory table,
DynamoDB (moto) and SQLite, one after the other and concurrently."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Chat, Role
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store import items as it
from agent_core.store.table import Item, Table
from tests.support.barrier import BarrierTable
from tests.support.fixtures import make_settings

USER = "alice"


def _first_message_marker(item: Item) -> bool:
    return str(item.get("PK", "")).startswith("USER#") and str(item.get("SK", "")).startswith("REQ#")


def _context(table: Table) -> AppContext:
    return build_context(make_settings(), table=table, audit=lambda line: None)


def _client(ctx: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": USER}, timeout=60
    )


def _events(answer: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]


def _chat_id(answer: httpx.Response) -> str:
    ids = {e["chatId"] for e in _events(answer) if "chatId" in e}
    assert len(ids) == 1, answer.text
    return ids.pop()


async def _user_messages(ctx: AppContext, chat_id: str) -> list[str]:
    messages = await ctx.deps.chats.messages_between(chat_id, None, None)
    return [m.content for m in messages if m.role == Role.USER]


async def _chats(ctx: AppContext) -> list[Chat]:
    return (await ctx.deps.chats.list_chats(USER, 10, None)).items


async def test_the_store_creates_one_chat_per_user_and_request_id(any_table: Table) -> None:
    store = _context(any_table).deps.chats
    first = Chat(chat_id="c_first", user_id=USER, created_at=1, last_activity_at=1)
    again = Chat(chat_id="c_again", user_id=USER, created_at=2, last_activity_at=2)
    other_user = Chat(chat_id="c_bob", user_id="bob", created_at=3, last_activity_at=3)
    assert (await store.create_chat(first, request_id="req-1")).chat_id == "c_first"
    assert (await store.create_chat(again, request_id="req-1")).chat_id == "c_first"  # the first call's chat
    assert (await store.create_chat(again, request_id="req-2")).chat_id == "c_again"  # another request
    assert (await store.create_chat(other_user, request_id="req-1")).chat_id == "c_bob"  # another user's
    assert await store.get_chat("c_first", USER) is not None
    assert await any_table.get(it.first_request_key(USER, "req-1")) is not None


async def test_a_retried_first_message_answers_with_the_first_attempts_chat(any_table: Table) -> None:
    ctx = _context(any_table)
    body = {"message": "what time is it in Tokyo?", "requestId": "first-1"}
    async with _client(ctx) as client:
        first = await client.post("/api/ap/query", json=body)
        retry = await client.post("/api/ap/query", json=body)
    assert first.status_code == retry.status_code == 200
    chat_id = _chat_id(first)
    # The retry is the first attempt's run replayed: same chat, same run, same answer
    assert _chat_id(retry) == chat_id
    assert {e["runId"] for e in _events(retry) if "runId" in e} == {e["runId"] for e in _events(first) if "runId" in e}
    assert [c.chat_id for c in await _chats(ctx)] == [chat_id]
    assert await _user_messages(ctx, chat_id) == [body["message"]]


async def test_a_retried_first_message_while_the_first_runs_is_409(any_table: Table) -> None:
    ctx = _context(any_table)
    holding = await prepare_turn(ctx.deps, TurnRequest(user_id=USER, message="first", request_id="first-2"))
    assert isinstance(holding, PreparedTurn)
    async with _client(ctx) as client:
        retry = await client.post("/api/ap/query", json={"message": "first", "requestId": "first-2"})
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "run_in_progress"
    assert [c.chat_id for c in await _chats(ctx)] == [holding.chat.chat_id]
    assert await _user_messages(ctx, holding.chat.chat_id) == ["first"]


async def test_two_concurrent_first_messages_with_one_request_id_make_one_chat(any_table: Table) -> None:
    ctx = _context(BarrierTable(any_table, _first_message_marker))  # type: ignore[arg-type]
    body = {"message": "hello there", "requestId": "first-3"}
    async with _client(ctx) as client:
        answers = await asyncio.gather(client.post("/api/ap/query", json=body), client.post("/api/ap/query", json=body))
    statuses = sorted(a.status_code for a in answers)
    # One attempt runs the turn; the other finds it running (409) or, had it finished, its replay (200)
    assert statuses in ([200, 409], [200, 200]), [a.text for a in answers]
    [chat] = await _chats(ctx)
    assert all(_chat_id(a) == chat.chat_id for a in answers if a.status_code == 200)
    assert await _user_messages(ctx, chat.chat_id) == ["hello there"]


async def test_first_messages_without_a_request_id_still_open_a_chat_each(any_table: Table) -> None:
    ctx = _context(any_table)
    async with _client(ctx) as client:
        for _ in range(2):
            assert (await client.post("/api/ap/query", json={"message": "hello"})).status_code == 200
    assert len(await _chats(ctx)) == 2


@pytest.mark.parametrize("header", [True, False], ids=["x-request-id", "body"])
async def test_the_x_request_id_header_is_the_same_key(any_table: Table, header: bool) -> None:
    ctx = _context(any_table)
    kwargs: dict[str, Any] = (
        {"json": {"message": "hi"}, "headers": {"X-Request-Id": "first-4"}}
        if header
        else {"json": {"message": "hi", "requestId": "first-4"}}
    )
    async with _client(ctx) as client:
        first = await client.post("/api/ap/query", **kwargs)
        retry = await client.post("/api/ap/query", **kwargs)
    assert _chat_id(first) == _chat_id(retry)
    assert len(await _chats(ctx)) == 1


async def test_deleting_the_chat_deletes_its_first_message_marker(any_table: Table) -> None:
    ctx = _context(any_table)
    body = {"message": "remember this", "requestId": "first-5"}
    async with _client(ctx) as client:
        first = await client.post("/api/ap/query", json=body)
        chat_id = _chat_id(first)
        # Given another chat that a later turn with the same requestId went to (its marker is not this chat's)
        other = await client.post("/api/ap/query", json={"message": "elsewhere", "requestId": "first-6"})
        await client.post("/api/ap/query", json={"message": "again", "chatId": chat_id, "requestId": "first-6"})
        assert (await client.delete(f"/api/v1/conversations/{chat_id}")).status_code == 204
        # Then the chat's marker went with it; another chat's marker stays
        assert await any_table.get(it.first_request_key(USER, "first-5")) is None
        assert await any_table.get(it.first_request_key(USER, "first-6")) is not None
        # And the same first message sent again opens a new chat (it answered 404: the marker's chat was gone)
        again = await client.post("/api/ap/query", json=body)
    assert again.status_code == 200, again.text
    assert _chat_id(again) not in (chat_id, _chat_id(other))
    assert await _user_messages(ctx, _chat_id(again)) == [body["message"]]


async def test_a_retried_deletion_leaves_a_marker_another_chat_took_since(any_table: Table) -> None:
    store = _context(any_table).deps.chats
    old = Chat(chat_id="c_old", user_id=USER, created_at=1, last_activity_at=1)
    new = Chat(chat_id="c_new", user_id=USER, created_at=2, last_activity_at=2)
    await store.create_chat(old, request_id="req-7")
    # Given a deletion of c_old that stopped after its marker, and the same first message sent again since
    await any_table.delete(it.first_request_key(USER, "req-7"))
    assert (await store.create_chat(new, request_id="req-7")).chat_id == "c_new"
    # When the deletion of c_old is retried, c_new keeps its marker
    assert await store.delete_chat("c_old", USER)
    marker = await any_table.get(it.first_request_key(USER, "req-7"))
    assert marker is not None and marker["chatId"] == "c_new"
    assert await store.get_chat("c_old", USER) is None
