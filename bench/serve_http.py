"""A plain turn over HTTP through `agent-core serve` against the same turn in-process, in one run.

Both sides run the local server's app on the embedded store (SQLite) with the offline model, so the model
costs ~nothing and what differs is the path: a subprocess behind uvicorn over loopback TCP (what `make run`
starts) against httpx's ASGI transport calling the app in this process. Turns are interleaved (http,
in-process, in-process, http, ...) so machine noise hits both alike; each side rotates over its own chats.
Per turn, at the client: request sent -> last SSE event read. Over HTTP also the first `content.delta`
read (in-process, httpx's ASGI transport hands over the body only once the app has finished).

A streamed turn writes a dozen small SSE events: with Nagle's algorithm on the server's sockets (the
listening socket created without IPPROTO_TCP), each write after the first waits for the client's delayed
ACK, ~40 ms a turn; `agent_core.cli.listen` creates it with the protocol number, so asyncio sets
TCP_NODELAY on each connection.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.config import Settings
from agent_core.context import build_context
from bench.common import percentile
from tests.support.local_server import local_server
from tests.support.sse import events_in

TURNS = 300
WARMUP = 20
CHATS = 20
TARGET_RATIO = 1.5
QUIET = {"POWERTOOLS_LOG_LEVEL": "WARNING", "AGENT_MEMORY_WINDOW": "20", "AGENT_MEMORY_COMPACT_AFTER": "40"}
PATHS = ("http", "in_process")


async def timed_turn(client: httpx.AsyncClient, chat_id: str | None, message: str) -> tuple[float, float, str]:
    """(whole turn ms, first text ms, chat id) of one streamed POST /api/ap/query."""
    body: dict[str, Any] = {"message": message, **({"chatId": chat_id} if chat_id else {})}
    started = time.perf_counter()
    first = 0.0
    raw = ""
    async with client.stream("POST", "/api/ap/query", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for text in response.aiter_text():
            if not first and '"content.delta"' in text:
                first = time.perf_counter()
            raw += text
    ended = time.perf_counter()
    events = events_in(raw)
    assert events[-1]["type"] == "run.complete", events[-1]
    return (ended - started) * 1000, (first - started) * 1000, str(events[0]["chatId"])


async def _measure(clients: dict[str, httpx.AsyncClient], turns: int, warmup: int) -> dict[str, dict[str, list[float]]]:
    chats: dict[str, list[str]] = {p: [] for p in PATHS}
    times: dict[str, dict[str, list[float]]] = {p: {"turn": [], "first_text": []} for p in PATHS}
    for n in range(warmup + turns):
        for path in PATHS if n % 2 == 0 else PATHS[::-1]:
            chat = chats[path][n % CHATS] if n >= CHATS else None
            total, first, chat_id = await timed_turn(clients[path], chat, f"turn {n}: how is the report going?")
            if chat is None:
                chats[path].append(chat_id)
            if n >= warmup:
                times[path]["turn"].append(total)
                times[path]["first_text"].append(first)
    return times


def run(turns: int = TURNS, warmup: int = WARMUP) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-serve-") as served_dir,
        tempfile.TemporaryDirectory(prefix="bench-inproc-") as inproc_dir,
        local_server(AGENT_STORAGE="embedded", AGENT_DATA_DIR=served_dir, **QUIET) as (base, _),
    ):
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None, AGENT_STORAGE="embedded", AGENT_DATA_DIR=inproc_dir, AGENT_LLM_PROVIDER="offline", **QUIET
        )
        app = build_app(*routes.local, context=build_context(settings))

        async def both() -> dict[str, dict[str, list[float]]]:
            headers = {"Authorization": "Bearer bench"}
            async with (
                httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http,
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url="http://in-process", timeout=60, headers=headers
                ) as in_process,
            ):
                return await _measure({"http": http, "in_process": in_process}, turns, warmup)

        times = asyncio.run(both())
    result: dict[str, Any] = {
        path: {
            "turns": len(times[path]["turn"]),
            "turn_p50_ms": round(statistics.median(times[path]["turn"]), 2),
            "turn_p99_ms": round(percentile(times[path]["turn"], 99), 2),
        }
        for path in PATHS
    }
    result["http"]["first_text_p50_ms"] = round(statistics.median(times["http"]["first_text"]), 2)
    result["ratio"] = round(result["http"]["turn_p50_ms"] / result["in_process"]["turn_p50_ms"], 2)
    result["meets_target"] = result["ratio"] <= TARGET_RATIO
    print(result, flush=True)
    return result


if __name__ == "__main__":
    run()
