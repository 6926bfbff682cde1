"""The local server on the embedded store (SQLite) beside the in-memory store, over the same HTTP path.

Two `agent-core serve` processes (what `make run` starts; offline model, so the model costs ~nothing), one
with AGENT_STORAGE=embedded, one with AGENT_STORAGE=memory, measured in one run with their turns
interleaved (memory, embedded, embedded, memory, ...) so machine noise hits both alike:

1. 1,000 plain streamed turns each (POST /api/ap/query, 20 chats in rotation, compaction at its defaults):
   the whole turn (request sent -> last SSE event read) and the time to the first text (first
   `content.delta` read), both at the client; the server's RSS (/proc VmRSS) after every 200 turns.
2. 50 chats x 3 turns at once (asyncio, one connection each): errors, and each chat's messages counted.
3. A restart in the middle: both servers stopped and started again on the same data directory; every chat
   and message from before is read back; then 50 x 3 at once again, and everything counted again.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.common import percentile
from tests.support.local_server import local_server
from tests.support.sse import aiter_events, sse_events

TURNS = 1000
CHATS = 20
RSS_EVERY = 200
LOAD_CHATS, LOAD_TURNS = 50, 3
STORAGES = ("memory", "embedded")
QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING", "AGENT_MEMORY_WINDOW": "20", "AGENT_MEMORY_COMPACT_AFTER": "40"}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


@contextmanager
def servers(data_dirs: dict[str, str]) -> Iterator[dict[str, tuple[str, int]]]:
    """Both servers up: storage -> (base URL, pid)."""
    with (
        local_server(AGENT_STORAGE="memory", AGENT_DATA_DIR=data_dirs["memory"], **QUIET) as (mem, mem_p),
        local_server(AGENT_STORAGE="embedded", AGENT_DATA_DIR=data_dirs["embedded"], **QUIET) as (emb, emb_p),
    ):
        yield {"memory": (mem, mem_p.pid), "embedded": (emb, emb_p.pid)}


def timed_turn(client: httpx.Client, chat_id: str | None, message: str) -> tuple[float, float, str]:
    """(whole turn ms, first text ms, chat id) of one streamed turn."""
    body: dict[str, Any] = {"message": message}
    if chat_id:
        body["chatId"] = chat_id
    started = time.perf_counter()
    first = 0.0
    with client.stream("POST", "/api/ap/query", json=body) as response:
        assert response.status_code == 200, response.read()
        events = []
        for event in sse_events(response):
            if not first and event["type"] == "content.delta":
                first = time.perf_counter()
            events.append(event)
    ended = time.perf_counter()
    assert events[-1]["type"] == "run.complete", events[-1]
    return (ended - started) * 1000, (first - started) * 1000, str(events[0]["chatId"])


def plain_turns(urls: dict[str, tuple[str, int]], turns: int) -> dict[str, Any]:
    clients = {s: httpx.Client(base_url=urls[s][0], timeout=60, headers=_auth("bench")) for s in STORAGES}
    chats: dict[str, list[str]] = {s: [] for s in STORAGES}
    whole: dict[str, list[float]] = {s: [] for s in STORAGES}
    first: dict[str, list[float]] = {s: [] for s in STORAGES}
    rss: dict[str, list[tuple[int, float]]] = {s: [(0, rss_mb(urls[s][1]))] for s in STORAGES}
    try:
        for n in range(turns):
            # Alternate which server goes first, so neither always follows the other's turn.
            for storage in STORAGES if n % 2 == 0 else STORAGES[::-1]:
                chat = chats[storage][n % CHATS] if n >= CHATS else None
                total, ttft, chat_id = timed_turn(clients[storage], chat, f"turn {n}: how is the report going?")
                if chat is None:
                    chats[storage].append(chat_id)
                whole[storage].append(total)
                first[storage].append(ttft)
                if (n + 1) % RSS_EVERY == 0:
                    rss[storage].append((n + 1, rss_mb(urls[storage][1])))
    finally:
        for client in clients.values():
            client.close()
    result: dict[str, Any] = {}
    for s in STORAGES:
        result[s] = {
            "turns": len(whole[s]),
            "turn_p50_ms": round(statistics.median(whole[s]), 2),
            "turn_p99_ms": round(percentile(whole[s], 99), 2),
            "first_text_p50_ms": round(statistics.median(first[s]), 2),
            "first_text_p99_ms": round(percentile(first[s], 99), 2),
            "rss_mb": rss[s],
        }
    emb, mem = result["embedded"], result["memory"]
    result["turn_ratio"] = round(emb["turn_p50_ms"] / mem["turn_p50_ms"], 2)
    result["first_text_ratio"] = round(emb["first_text_p50_ms"] / mem["first_text_p50_ms"], 2)
    rss_200 = dict(emb["rss_mb"])[RSS_EVERY] if turns >= RSS_EVERY else None
    result["embedded_rss_growth_200_to_end_mb"] = round(emb["rss_mb"][-1][1] - rss_200, 1) if rss_200 else None
    return result


def _auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}"}


async def concurrent_chats(base: str, tag: str) -> dict[str, Any]:
    """50 chats x 3 turns at once; then each chat's messages are counted."""
    errors: list[str] = []
    limits = httpx.Limits(max_connections=LOAD_CHATS + 5, max_keepalive_connections=LOAD_CHATS + 5)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits, headers=_auth(f"load-{tag}")) as client:

        async def chat(n: int) -> str | None:
            chat_id: str | None = None
            for t in range(LOAD_TURNS):
                body: dict[str, Any] = {"message": f"{tag} chat {n} turn {t}"}
                if chat_id:
                    body["chatId"] = chat_id
                try:
                    async with client.stream("POST", "/api/ap/query", json=body) as response:
                        if response.status_code != 200:
                            errors.append(f"{response.status_code}: {(await response.aread())[:200]!r}")
                            continue
                        events = [e async for e in aiter_events(response)]
                except httpx.HTTPError as error:
                    errors.append(f"{type(error).__name__}: {error}")
                    continue
                if not events or events[-1]["type"] != "run.complete":
                    errors.append(f"stream ended with {events[-1]['type'] if events else 'nothing'}")
                chat_id = chat_id or (str(events[0]["chatId"]) if events else None)
            return chat_id

        started = time.perf_counter()
        chat_ids = await asyncio.gather(*(chat(n) for n in range(LOAD_CHATS)))
        wall = time.perf_counter() - started
        lost = duplicated = 0
        for n, chat_id in enumerate(chat_ids):
            expected = [f"{tag} chat {n} turn {t}" for t in range(LOAD_TURNS)]
            if chat_id is None:
                lost += len(expected)
                continue
            page = (await client.get(f"/api/v1/conversations/{chat_id}/messages", params={"limit": 100})).json()
            users = [m["content"] for m in page["items"] if m["role"] == "USER"]
            lost += len([m for m in expected if m not in users])
            duplicated += len(users) - len(set(users))
    return {
        "turns": LOAD_CHATS * LOAD_TURNS,
        "errors": len(errors),
        "lost": lost,
        "duplicated": duplicated,
        "wall_s": round(wall, 2),
        "first_errors": errors[:3],
    }


def messages_of(client: httpx.Client, user: str, chat_id: str) -> list[tuple[str, str, str]]:
    """Every message of a chat, all pages: (id, role, content)."""
    found: list[tuple[str, str, str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/api/v1/conversations/{chat_id}/messages", params=params, headers=_auth(user)).json()
        found.extend((m["id"], m["role"], m["content"]) for m in page["items"])
        cursor = page.get("nextCursor")
        if not cursor:
            return found


def snapshot(base: str, users: list[str]) -> dict[str, Any]:
    """Every chat of these users and every message of each chat (ids and contents)."""
    found: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=60) as client:
        for user in users:
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"limit": 100, **({"cursor": cursor} if cursor else {})}
                page = client.get("/api/ap/chats", params=params, headers=_auth(user)).json()
                for chat in page["items"]:
                    found[chat["chatId"]] = messages_of(client, user, chat["chatId"])
                cursor = page.get("nextCursor")
                if not cursor:
                    break
    return found


def run(turns: int = TURNS) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-emb-") as emb_dir, tempfile.TemporaryDirectory() as mem_dir:
        dirs = {"embedded": emb_dir, "memory": mem_dir}
        users = ["bench", "load-before"]
        with servers(dirs) as urls:
            results["plain"] = plain_turns(urls, turns)
            print({"plain": results["plain"]}, flush=True)
            results["load_before_restart"] = {s: asyncio.run(concurrent_chats(urls[s][0], "before")) for s in STORAGES}
            print({"load_before_restart": results["load_before_restart"]}, flush=True)
            before = {s: snapshot(urls[s][0], users) for s in STORAGES}
        with servers(dirs) as urls:
            after = {s: snapshot(urls[s][0], users) for s in STORAGES}
            results["restart"] = {
                s: {
                    "chats_before": len(before[s]),
                    "messages_before": sum(len(m) for m in before[s].values()),
                    "chats_after": len(after[s]),
                    "messages_after": sum(len(m) for m in after[s].values()),
                    "identical": after[s] == before[s],
                }
                for s in STORAGES
            }
            print({"restart": results["restart"]}, flush=True)
            results["load_after_restart"] = {s: asyncio.run(concurrent_chats(urls[s][0], "after")) for s in STORAGES}
            print({"load_after_restart": results["load_after_restart"]}, flush=True)
            results["rss_after_mb"] = {s: rss_mb(urls[s][1]) for s in STORAGES}
        results["database_mb"] = round(sum(f.stat().st_size for f in Path(emb_dir).rglob("*")) / 2**20, 1)
    plain = results["plain"]
    emb = plain["embedded"]
    load_ok = all(
        results[phase]["embedded"][k] == 0
        for phase in ("load_before_restart", "load_after_restart")
        for k in ("errors", "lost", "duplicated")
    )
    growth = plain["embedded_rss_growth_200_to_end_mb"]
    results["meets_target"] = {
        "turn_ratio<=1.5": plain["turn_ratio"] <= 1.5,
        "first_text_ratio<=1.5": plain["first_text_ratio"] <= 1.5,
        "rss<250MB": emb["rss_mb"][-1][1] < 250,
        "rss_flat_200_to_end(<25MB)": growth is not None and growth < 25,
        "load_0_errors_lost_duplicated": load_ok,
        "restart_keeps_everything": results["restart"]["embedded"]["identical"],
    }
    print({"database_mb": results["database_mb"], "meets_target": results["meets_target"]}, flush=True)
    return results


if __name__ == "__main__":
    run()
