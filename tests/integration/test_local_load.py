"""The local server (`agent-core serve`, embedded SQLite, offline model) under load and across a restart.

Load: 50 chats x 3 turns at once, and 10 turns at once on one chat (one accepted, nine 409), then every
message counted: nothing lost, nothing duplicated. Restart: everything written before it is still there,
and a job queued before it runs after it. Bounded in size, never in time (no timed assertions).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agent_core.domain.jobs import SessionSummaryJob
from agent_core.store import items as it
from agent_core.store.embedded import DATABASE_FILE
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_jobs import SqliteJobJournal
from agent_core.store.sqlite_table import SqliteTable
from tests.support.links import unsigned
from tests.support.local_server import local_server
from tests.support.sse import aiter_events
from tests.support.wait import apoll_until

CHATS, TURNS, USERS, RACERS = 50, 3, 5, 10
ASK = 'ask me to pick "tea" or "coffee"'
QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING"}  # the server's stderr is a pipe nobody reads meanwhile


def _auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}"}


async def _new_chat(client: httpx.AsyncClient, user: str, title: str) -> str:
    response = await client.post("/api/v1/conversations", json={"title": title}, headers=_auth(user))
    assert response.status_code == 201, response.text
    return str(response.json()["conversationId"])


async def _turn(client: httpx.AsyncClient, user: str, chat_id: str, message: str) -> list[dict[str, Any]]:
    body = {"message": message, "chatId": chat_id}
    async with client.stream("POST", "/api/ap/query", json=body, headers=_auth(user)) as response:
        assert response.status_code == 200, await response.aread()
        events = [e async for e in aiter_events(response)]
    assert events[-1]["type"] == "run.complete", events[-1]
    return events


async def _messages(client: httpx.AsyncClient, user: str, chat_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/conversations/{chat_id}/messages", params={"limit": 100}, headers=_auth(user))
    assert response.status_code == 200, response.text
    assert response.json().get("nextCursor") in (None, "")
    return list(response.json()["items"])


async def _fifty_chats(client: httpx.AsyncClient) -> None:
    async def chat(n: int) -> tuple[str, str]:
        user = f"load-user-{n % USERS}"
        chat_id = await _new_chat(client, user, f"load {n}")
        for turn in range(TURNS):
            await _turn(client, user, chat_id, f"chat {n} turn {turn}: hello")
        return user, chat_id

    chats = await asyncio.gather(*(chat(n) for n in range(CHATS)))
    for n, (user, chat_id) in enumerate(chats):
        messages = await _messages(client, user, chat_id)
        users = [m["content"] for m in messages if m["role"] == "USER"]
        assert users == [f"chat {n} turn {t}: hello" for t in range(TURNS)]  # none lost, none doubled, in order
        assert [m["role"] for m in messages] == ["USER", "ASSISTANT"] * TURNS
        assert len({m["id"] for m in messages}) == len(messages)
    for u in range(USERS):
        listed = (await client.get("/api/ap/chats", params={"limit": 100}, headers=_auth(f"load-user-{u}"))).json()
        assert len(listed["items"]) == CHATS // USERS


async def _racing_turns(client: httpx.AsyncClient) -> None:
    user = "racer"
    chat_id = await _new_chat(client, user, "race")
    waiting = asyncio.Event()
    held: dict[str, Any] = {}

    async def racer(n: int) -> int:
        body = {"message": f"{ASK} (racer {n})", "chatId": chat_id, "requestId": f"race-{n}"}
        async with client.stream("POST", "/api/ap/query", json=body, headers=_auth(user)) as response:
            if response.status_code != 200:
                error = (await response.aread()).decode()
                assert response.status_code == 409 and "run_in_progress" in error, error
                return 409
            events: list[dict[str, Any]] = []
            async for event in aiter_events(response):
                events.append(event)
                if event["type"] == "tool.end" and not waiting.is_set():
                    held.update(runId=event["runId"], toolId=event["toolId"], racer=n)
                    waiting.set()  # the lease is held until the submit below
            assert events[-1]["type"] == "run.complete", events[-1]
            return 200

    tasks = [asyncio.create_task(racer(n)) for n in range(RACERS)]
    await waiting.wait()
    # The accepted turn waits for its submit: every other racer is answered while it holds the lease.
    await asyncio.gather(*(t for n, t in enumerate(tasks) if n != held["racer"]))
    submit = {"runId": held["runId"], "toolId": held["toolId"], "params": {"choice": "tea"}}
    assert (await client.post("/api/ap/submit", json=submit, headers=_auth(user))).json()["accepted"] is True
    statuses = Counter(await asyncio.gather(*tasks))
    assert statuses == {200: 1, 409: RACERS - 1}
    messages = await _messages(client, user, chat_id)
    assert [m["content"] for m in messages if m["role"] == "USER"] == [f"{ASK} (racer {held['racer']})"]
    assert [m["role"] for m in messages] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    # The lease was released: the next turn is accepted at once.
    await _turn(client, user, chat_id, "and now?")


async def test_fifty_chats_at_once_and_ten_racing_turns_lose_and_duplicate_nothing() -> None:
    with local_server(**QUIET) as (base, _process):
        limits = httpx.Limits(max_connections=CHATS + RACERS + 5, max_keepalive_connections=CHATS + RACERS + 5)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            await asyncio.gather(_fifty_chats(client), _racing_turns(client))


async def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    """A bounded wait for the server's background work (another process) to show in its database."""

    async def holds() -> bool:
        return predicate()

    await apoll_until(holds, what, interval_s=0.05)


def _journal_empty(data_dir: Path) -> bool:
    with sqlite3.connect(data_dir / DATABASE_FILE) as connection:
        return connection.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


def _unsigned(value: Any) -> Any:
    """`value` with every data link's read token blanked (tokens carry the time they were signed)."""
    return json.loads(unsigned(json.dumps(value)))


def _has_item(data_dir: Path, key: dict[str, str]) -> bool:
    with sqlite3.connect(data_dir / DATABASE_FILE) as connection:
        row = connection.execute("SELECT 1 FROM items WHERE pk = ? AND sk = ?", (key["pk"], key["sk"])).fetchone()
    return row is not None


async def test_a_restart_keeps_chats_runs_files_and_summaries_and_runs_queued_jobs(tmp_path: Path) -> None:
    env = {**QUIET, "AGENT_DATA_DIR": str(tmp_path)}
    user, headers = "restarter", _auth("restarter")
    with local_server(**env) as (base, _process):
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as client:
            chat_id = await _new_chat(client, user, "before the restart")
            await _turn(client, user, chat_id, "save this as notes.txt: meet at 3pm")
            await _turn(client, user, chat_id, "what time is it in Tokyo?")
            ended = (await client.post(f"/api/ap/chat/{chat_id}/end")).json()
            assert ended["ended"] is True
            await _wait_for(lambda: _journal_empty(tmp_path), "the session summary job ran")
            before = {
                "messages": await _messages(client, user, chat_id),
                "chats": (await client.get("/api/ap/chats")).json(),
                "replay": (await client.get("/api/ap/chat", params={"chatId": chat_id})).json(),
                "file": (await client.get("/api/ap/data", params={"file": f"{chat_id}/notes.txt"})).text,
            }
    assert _has_item(tmp_path, it.session_key(chat_id, ended["sessionId"]))

    # While the server is down, a job is queued (as if it had been enqueued just before a stop).
    db = SqliteDatabase(tmp_path / DATABASE_FILE)
    job = SessionSummaryJob(chat_id=chat_id, user_id=user, session_id="s_queued", started_at=0, ended_at=2**41)
    await SqliteJobJournal(db).add(job)
    assert await SqliteTable(db).get(it.session_key(chat_id, "s_queued")) is None
    db.close()

    with local_server(**env) as (base, _process):
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as client:
            after = {
                "messages": await _messages(client, user, chat_id),
                "chats": (await client.get("/api/ap/chats")).json(),
                "replay": (await client.get("/api/ap/chat", params={"chatId": chat_id})).json(),
                "file": (await client.get("/api/ap/data", params={"file": f"{chat_id}/notes.txt"})).text,
            }
            # Links are signed when read (a fresh expiry each time): compare everything but their tokens.
            assert _unsigned(after) == _unsigned(before)
            assert [m["role"] for m in after["messages"]].count("USER") == 2 and after["file"] == "meet at 3pm"
            await _wait_for(lambda: _has_item(tmp_path, it.session_key(chat_id, "s_queued")), "the queued job ran")
            await _wait_for(lambda: _journal_empty(tmp_path), "the queued job left the journal")
            await _turn(client, user, chat_id, "still here?")
