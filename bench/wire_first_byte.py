"""Time to first text byte through each streaming endpoint, all five answered by the same scripted model.

One local app (uvicorn on loopback, the in-memory table) whose LLM is the loopback OpenAI stub read
through the real openai SDK; every request is answered with the same short streamed answer. A turn is
timed at the client (httpx): request sent -> the first event carrying answer text read, where "text" is
each wire's own form of a `content.delta` (`docs/clients.md`):

- native SSE, `POST /api/ap/query`: the first `content.delta`;
- OpenAI Responses, `POST /v1/responses` with `stream: true`: the first `response.output_text.delta`;
- OpenAI Chat Completions, `POST /v1/chat/completions` with `stream: true`: the first chunk whose
  `choices[0].delta.content` is not empty;
- Vercel AI SDK UI message stream, `POST /api/ui-stream`: the first `text-delta` part;
- AG-UI, `POST /api/ag-ui`: the first `TEXT_MESSAGE_CONTENT`.

Every turn starts a new conversation (a new chat, response, `id` or `threadId`), so the history the model
is sent is the same for every wire. Each stream is read to its end, and checked to have ended normally,
before the next turn starts. Turns are interleaved round-robin (the first wire of a round rotates), so
drift on the shared machine hits every wire alike; one warm-up turn per wire is dropped.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.memory_table import MemoryTable
from bench.common import ANSWER_PARTS, USER_MESSAGE, after_turn, make_settings, percentile, quiet_observability
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve

TURNS = 200  # per wire; a turn takes ~5 ms, so p99 is a real percentile, not the maximum
AGENT = "main-agent"


def _pieces() -> tuple[str, ...]:
    """The short streamed answer every request gets: ANSWER_PARTS cut into groups of three words."""
    out: list[str] = []
    for part in ANSWER_PARTS:
        words = part.split(" ")
        out += [" ".join(words[i : i + 3]) + " " for i in range(0, len(words), 3)]
    return tuple(p for p in out if p.strip())


@dataclass(frozen=True)
class Wire:
    """One streaming endpoint: its path, its request body, which event is text, which event ends it well."""

    path: str
    body: Callable[[], dict[str, Any]]
    is_text: Callable[[dict[str, Any]], bool]
    is_end: Callable[[dict[str, Any]], bool]


def _user_ui_message() -> dict[str, Any]:
    return {"id": f"u-{uuid.uuid4().hex}", "role": "user", "parts": [{"type": "text", "text": USER_MESSAGE}]}


def _chat_text(event: dict[str, Any]) -> bool:
    choices = event.get("choices") or []
    return bool(choices and (choices[0].get("delta") or {}).get("content"))


def _chat_end(event: dict[str, Any]) -> bool:
    choices = event.get("choices") or []
    return bool(choices and choices[0].get("finish_reason") == "stop")


WIRES: dict[str, Wire] = {
    "native": Wire(
        "/api/ap/query",
        lambda: {"message": USER_MESSAGE},
        lambda e: e.get("type") == "content.delta",
        lambda e: e.get("type") == "run.complete",
    ),
    "responses": Wire(
        "/v1/responses",
        lambda: {"model": AGENT, "input": USER_MESSAGE, "stream": True},
        lambda e: e.get("type") == "response.output_text.delta",
        lambda e: e.get("type") == "response.completed",
    ),
    "chat_completions": Wire(
        "/v1/chat/completions",
        lambda: {"model": AGENT, "stream": True, "messages": [{"role": "user", "content": USER_MESSAGE}]},
        _chat_text,
        _chat_end,
    ),
    "ui_stream": Wire(
        "/api/ui-stream",
        lambda: {"id": f"chat-{uuid.uuid4().hex}", "messages": [_user_ui_message()], "trigger": "submit-message"},
        lambda e: e.get("type") == "text-delta",
        lambda e: e.get("type") == "finish",
    ),
    "ag_ui": Wire(
        "/api/ag-ui",
        lambda: {
            "threadId": f"thread-{uuid.uuid4().hex}",
            "runId": f"run-{uuid.uuid4().hex}",
            "state": {},
            "messages": [{"id": f"m-{uuid.uuid4().hex}", "role": "user", "content": USER_MESSAGE}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        },
        lambda e: e.get("type") == "TEXT_MESSAGE_CONTENT",
        lambda e: e.get("type") == "RUN_FINISHED",
    ),
}


def _data(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """Every SSE `data:` payload as JSON (`[DONE]` and `event:`/comment lines skipped)."""
    for line in response.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[len("data: ") :])


def first_text_ms(client: httpx.Client, wire: Wire) -> float:
    """One turn through `wire`: ms from sending the request to reading its first text event."""
    started = time.perf_counter()
    first = 0.0
    ended = False
    with client.stream("POST", wire.path, json=wire.body()) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{wire.path}: {response.status_code} {response.read()!r}")
        for event in _data(response):
            if not first and wire.is_text(event):
                first = time.perf_counter()
            ended = ended or wire.is_end(event)
    if not first or not ended:
        raise RuntimeError(f"{wire.path}: no text or no normal end (text read: {bool(first)})")
    return (first - started) * 1000


def measure(base_url: str, turns: int) -> dict[str, list[float]]:
    names = list(WIRES)
    times: dict[str, list[float]] = {name: [] for name in names}
    with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": "Bearer bench"}) as client:
        for name in names:  # warm-up: imports, first-call caches, the connection
            first_text_ms(client, WIRES[name])
            after_turn()
        for n in range(turns):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                times[name].append(first_text_ms(client, WIRES[name]))
                after_turn()
    return times


def run(turns: int = TURNS) -> dict[str, Any]:
    quiet_observability()
    pieces = _pieces()
    with OpenAiStub() as stub:
        script = StubScript.text(*pieces)
        # Every request the app makes gets this same answer (scripts are only read, so one object serves all).
        stub.enqueue(*[script] * (turns + 1) * len(WIRES) * 4)
        settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="sk-b")
        context = build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda _: None)
        with serve(build_app(*routes.local, context=context)) as base:
            times = measure(base, turns)
        llm_requests = len(stub.requests)
    result: dict[str, Any] = {"turns": turns, "answer_deltas": len(pieces), "llm_requests": llm_requests}
    for name, values in times.items():
        result[name] = {
            "first_text_p50_ms": round(statistics.median(values), 2),
            "first_text_p99_ms": round(percentile(values, 99), 2),
        }
    native = result["native"]
    for name in WIRES:
        for p in ("p50", "p99"):
            key = f"first_text_{p}_ms"
            result[name][f"ratio_{p}"] = round(result[name][key] / native[key], 2)
    print(result)
    return result


if __name__ == "__main__":
    run()
