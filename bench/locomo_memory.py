"""Long-term memory recall on LOCOMO (the development half), through the product's own HTTP API.

    .venv/bin/python -m bench.locomo_memory /path/to/locomo-dev

The folder is an argument and nothing of it enters the repository (CC BY-NC 4.0). Without it the benchmark says
so and skips. Against a local server (`agent-core serve`: embedded SQLite store, offline model, hashing
embedder), each conversation is one user: each session is imported as one chat (`POST /api/ap/chats/import`;
speaker A as `user`, speaker B as `assistant`, each text prefixed with its speaker's name, `createdAt` from the
session's date, one minute apart), the background jobs are drained (`POST /api/dev/jobs/idle-sessions` waits
for the in-process queue), then every question of categories 1-4 calls `POST /api/ap/memory/search` with
`maxTokens: 1800`. A question scores against its `evidence` dia_ids, counting only records citing <= 4
messages: all-evidence recall (every evidence turn cited) and any-evidence recall (one at least). Malformed
evidence ids count as not found.

Also reported: the same questions ranked by plain BM25 over sliding 2-turn windows (the baseline, built in this
run from the same imported messages), search latency over HTTP, import throughput, and the prompt tokens a plain
turn with nothing relevant gets from memory (the runtime's own recall, through the same server).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from agent_core.config import Settings
from agent_core.context import build_context
from agent_core.llm.tokens import estimate_text
from agent_core.memory.calendar import zone
from agent_core.memory.lexical import Bm25Index
from agent_core.memory.recall import recall_block
from agent_core.store.embedded import close_embedded
from bench.common import percentile
from tests.support.local_server import local_server

MAX_TOKENS = 1800
MAX_CITED = 4
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA = re.compile(r"^D(\d+):(\d+)$")
PLAIN_TURN = "Hi! How are you today?"


def session_time(text: str) -> datetime:
    """`1:56 pm on 8 May, 2023` (no zone in the data: read as UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list) and turns:
            n = int(match.group(1))
            out.append((n, session_time(conversation[f"session_{n}_date_time"]), turns))
    return sorted(out)


def import_body(conversation: dict[str, Any], n: int, at: datetime, turns: list[dict[str, Any]]) -> dict[str, Any]:
    a = conversation["speaker_a"]
    messages = [
        {
            "role": "user" if t["speaker"] == a else "assistant",
            "content": f"{t['speaker']}: {t['text']}",
            "createdAt": (at + timedelta(minutes=i)).isoformat(),
        }
        for i, t in enumerate(turns)
    ]
    return {"title": f"session {n}", "messages": messages}


def _hit(evidence: list[str], cited: set[str], ids: dict[str, str]) -> tuple[bool, bool]:
    wanted = [ids.get(e) for e in evidence]
    found = [w is not None and w in cited for w in wanted]
    return all(found) and bool(found), any(found)


def run(folder: str) -> dict[str, Any]:
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        raise SystemExit(f"no LOCOMO conversations (*.json) in {folder}")
    data_dir = tempfile.mkdtemp(prefix="locomo-")
    env = {"POWERTOOLS_LOG_LEVEL": "WARNING", "AGENT_STAGE": "dev", "AGENT_DATA_DIR": data_dir}
    scores: dict[str, dict[int, list[tuple[bool, bool]]]] = {"hybrid": defaultdict(list), "bm25": defaultdict(list)}
    latencies: list[float] = []
    imported, import_s = 0, 0.0
    floor: list[float] = []
    users: list[str] = []
    with local_server(**env) as (base, _process), httpx.Client(base_url=base, timeout=120) as client:
        for path in files:
            data = json.loads(path.read_text())
            conv = data.get("conversation", data)
            user = f"locomo-{path.stem}"
            users.append(user)
            headers = {"X-User-Id": user}
            ids: dict[str, str] = {}
            windows: list[tuple[str, list[str]]] = []
            for n, at, turns in sessions(conv):
                body = import_body(conv, n, at, turns)
                started = time.perf_counter()
                answer = client.post("/api/ap/chats/import", json=body, headers=headers)
                import_s += time.perf_counter() - started
                answer.raise_for_status()
                message_ids = answer.json()["messageIds"]
                imported += len(message_ids)
                for turn, mid in zip(turns, message_ids, strict=True):
                    ids[turn["dia_id"]] = mid
                lines = [m["content"] for m in body["messages"]]
                for i in range(max(1, len(lines) - 1)):
                    windows.append(("\n".join(lines[i : i + 2]), message_ids[i : i + 2]))
            client.post("/api/dev/jobs/idle-sessions", headers=headers).raise_for_status()
            lexical = Bm25Index([w[0] for w in windows])
            for qa in data["qa"]:
                category = int(qa.get("category", 0))
                if category not in CATEGORIES:
                    continue
                evidence = [str(e) for e in qa.get("evidence") or []]
                question = str(qa["question"])
                started = time.perf_counter()
                found = client.post(
                    "/api/ap/memory/search",
                    json={"query": question, "maxTokens": MAX_TOKENS, "limit": 100},
                    headers=headers,
                )
                latencies.append((time.perf_counter() - started) * 1000)
                found.raise_for_status()
                cited = {
                    m for r in found.json()["records"] if len(r["messageIds"]) <= MAX_CITED for m in r["messageIds"]
                }
                scores["hybrid"][category].append(_hit(evidence, cited, ids))
                ranked = lexical.scores(question).argsort()[::-1]
                budget, plain = 0, set()
                for i in ranked:
                    text, mids = windows[int(i)]
                    cost = estimate_text(text)
                    if budget + cost > MAX_TOKENS:
                        break
                    budget += cost
                    plain.update(mids)
                scores["bm25"][category].append(_hit(evidence, plain, ids))
            for _ in range(20):  # the server's floor: a route that reads one item (GET /api/ap/profile)
                started = time.perf_counter()
                client.get("/api/ap/profile", headers=headers).raise_for_status()
                floor.append((time.perf_counter() - started) * 1000)
        heavy = _heavy_user(client, files)
    plain_tokens = asyncio.run(_plain_turn_tokens(data_dir, users))
    shutil.rmtree(data_dir, ignore_errors=True)
    result = report(scores, latencies, imported, import_s, plain_tokens, len(files))
    result["profile_get_ms"] = {"p50": round(percentile(floor, 50), 1), "p95": round(percentile(floor, 95), 1)}
    result["heavy_user"] = heavy
    return result


def _heavy_user(client: httpx.Client, files: list[Path]) -> dict[str, Any]:
    """One user holding all five conversations (every session a chat): search latency at that size."""
    headers = {"X-User-Id": "locomo-all"}
    questions: list[str] = []
    messages = 0
    for path in files:
        data = json.loads(path.read_text())
        conv = data.get("conversation", data)
        for n, at, turns in sessions(conv):
            client.post(
                "/api/ap/chats/import", json=import_body(conv, n, at, turns), headers=headers
            ).raise_for_status()
            messages += len(turns)
        questions += [str(q["question"]) for q in data["qa"] if int(q.get("category", 0)) in CATEGORIES]
    client.post("/api/dev/jobs/idle-sessions", headers=headers).raise_for_status()
    timings = []
    for question in questions:
        started = time.perf_counter()
        client.post("/api/ap/memory/search", json={"query": question, "maxTokens": MAX_TOKENS}, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "messages": messages,
        "searches": len(timings),
        "search_ms": {"p50": round(percentile(timings, 50), 1), "p95": round(percentile(timings, 95), 1)},
    }


async def _plain_turn_tokens(data_dir: str, users: list[str]) -> list[int]:
    """What the runtime's recall (the "What you remember" block) adds to a plain turn, per user: the same
    function a turn calls, on the same database, with the default settings."""
    settings = Settings(_env_file=None, AGENT_STORAGE="embedded", AGENT_DATA_DIR=data_dir, AGENT_LLM_PROVIDER="offline")
    context = build_context(settings, audit=lambda line: None)
    tz = zone(None, settings.default_timezone)
    out = []
    for user in users:
        block = await recall_block(
            context.deps.memory,
            user,
            PLAIN_TURN,
            tz,
            settings.memory_recall_tokens,
            settings.memory_recall_min_similarity,
        )
        out.append(estimate_text(block))
    close_embedded(settings)
    return out


def _rates(results: list[tuple[bool, bool]]) -> dict[str, Any]:
    n = len(results) or 1
    return {
        "questions": len(results),
        "all_evidence": round(sum(a for a, _ in results) / n, 3),
        "any_evidence": round(sum(b for _, b in results) / n, 3),
    }


def report(
    scores: dict[str, dict[int, list[tuple[bool, bool]]]],
    latencies: list[float],
    imported: int,
    import_s: float,
    plain_tokens: list[int],
    conversations: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"conversations": conversations, "max_tokens": MAX_TOKENS}
    for name, by_category in scores.items():
        out[name] = {CATEGORIES[c]: _rates(r) for c, r in sorted(by_category.items())}
        out[name]["overall"] = _rates([x for r in by_category.values() for x in r])
    out["search_ms"] = {"p50": round(percentile(latencies, 50), 1), "p95": round(percentile(latencies, 95), 1)}
    out["import"] = {"messages": imported, "messages_per_s": round(imported / import_s) if import_s else None}
    out["plain_turn_extra_tokens"] = max(plain_tokens) if plain_tokens else None
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not Path(argv[1]).is_dir():
        print("skipped: pass the LOCOMO folder (python -m bench.locomo_memory /path/to/locomo-dev)")
        return 0
    print(json.dumps(run(argv[1]), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
