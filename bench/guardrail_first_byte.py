"""Added time to first byte with an agent's output guardrail on (the offline built-in adapter, action mask).

One local app (uvicorn on loopback, the in-memory table) whose model is the loopback OpenAI stub read through
the real openai SDK, answering every request with the same 461-character answer in 4-character deltas (116) (an
e-mail address and a phone number inside it). Two agents of the same app answer it, `direct` mode both: `plain`
(no guardrails) and `guarded` (`guardrails: {output: mask}`, the default detectors, the default 200-character
hold-back window). A turn is `POST /api/ap/query` timed at the client (httpx): request sent -> first
`content.delta` read, and -> `run.complete` read. Turns alternate between the agents (the first of a pair
rotates); one warm-up turn each is dropped. The guarded stream is checked to hold no address or number.

The stub streams without pauses, so what is measured is the guardrail's own cost (scanning each delta, the
first release once 200 characters are held) plus the time the stub takes to deliver those 200 characters; a
real model adds the time it takes to write them (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.memory_table import MemoryTable
from bench.common import USER_MESSAGE, after_turn, make_settings, percentile, quiet_observability
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve

TURNS = 200  # per agent
SECRETS = ("kim.lee@example.com", "+1 415-555-0134")
ANSWER = (
    "We agreed on a two-page summary with the revenue table first and the risks section last. "
    f"Kim will check the churn figure for March; reach her at {SECRETS[0]} or {SECRETS[1]} before Friday. "
    "The EMEA headcount still needs checking, and the appendix keeps last quarter's format so the board can "
    "compare the two at a glance. Send the draft to the whole team on Thursday morning so there is time for "
    "one round of comments before the final version goes out."
)
AGENTS = {
    "plain": "key: plain\nname: Plain\nmode: direct\n",
    "guarded": "key: guarded\nname: Guarded\nmode: direct\nguardrails:\n  output: mask\n",
}


def _pieces(text: str, size: int = 4) -> tuple[str, ...]:
    return tuple(text[i : i + size] for i in range(0, len(text), size))


def one_turn(client: httpx.Client, agent: str) -> tuple[float, float, str]:
    """(ms to the first content.delta, ms to run.complete, the answer text read)."""
    started = time.perf_counter()
    first = 0.0
    text: list[str] = []
    with client.stream("POST", "/api/ap/query", json={"message": USER_MESSAGE, "agentKey": agent}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{agent}: {response.status_code} {response.read()!r}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            if event["type"] == "content.delta":
                first = first or time.perf_counter()
                text.append(event["delta"])
            if event["type"] in ("run.error", "run.cancel"):
                raise RuntimeError(f"{agent}: {event}")
            if event["type"] == "run.complete":
                ended = time.perf_counter()
    if not first:
        raise RuntimeError(f"{agent}: no text")
    return (first - started) * 1000, (ended - started) * 1000, "".join(text)


def run(turns: int = TURNS) -> dict[str, Any]:
    quiet_observability()
    with tempfile.TemporaryDirectory() as directory, OpenAiStub() as stub:
        for key, definition in AGENTS.items():
            (Path(directory) / f"{key}.yaml").write_text(definition, encoding="utf-8")
        script = StubScript.text(*_pieces(ANSWER))
        stub.enqueue(*[script] * (turns + 1) * len(AGENTS) * 2)
        settings = make_settings(
            AGENT_LLM_PROVIDER="openai",
            OPENAI_BASE_URL=stub.base_url,
            OPENAI_API_KEY="sk-b",
            AGENT_DEFINITIONS_DIR=directory,
        )
        context = build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda _: None)
        first: dict[str, list[float]] = {name: [] for name in AGENTS}
        whole: dict[str, list[float]] = {name: [] for name in AGENTS}
        with serve(build_app(*routes.local, context=context)) as base:
            headers = {"Authorization": "Bearer bench"}
            with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
                for name in AGENTS:  # warm-up
                    one_turn(client, name)
                    after_turn()
                names = list(AGENTS)
                for n in range(turns):
                    for name in names[n % 2 :] + names[: n % 2]:
                        to_first, to_end, text = one_turn(client, name)
                        if name == "guarded" and any(secret in text for secret in SECRETS):
                            raise RuntimeError("the guarded answer leaked what it should mask")
                        first[name].append(to_first)
                        whole[name].append(to_end)
                        after_turn()
    result: dict[str, Any] = {"turns": turns, "answer_chars": len(ANSWER), "answer_deltas": len(_pieces(ANSWER))}
    for name in AGENTS:
        result[name] = {
            "first_byte_p50_ms": round(statistics.median(first[name]), 2),
            "first_byte_p95_ms": round(percentile(first[name], 95), 2),
            "complete_p50_ms": round(statistics.median(whole[name]), 2),
            "complete_p95_ms": round(percentile(whole[name], 95), 2),
        }
    for p in ("p50", "p95"):
        key = f"first_byte_{p}_ms"
        result[f"added_first_byte_{p}_ms"] = round(result["guarded"][key] - result["plain"][key], 2)
    print(result)
    return result


if __name__ == "__main__":
    run()
