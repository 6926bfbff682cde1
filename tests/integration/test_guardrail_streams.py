"""Guardrails on every wire: nothing masked or blocked reaches a client, the stored answer is what was sent.

500 seeded streams (100 per wire) carry PII cut at random delta boundaries; each wire's SSE is read in its own
format and its text must hold no PII and equal the answer masked whole; a native stream's stored answer and
replay equal what it sent. A window of 0 (no hold-back) is shown
to leak on the same streams, so the fuzz can see a leak.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.guardrails.detectors import BuiltinAdapter
from agent_core.guardrails.findings import masked
from agent_core.guardrails.policy import DETECTORS
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.pii import answer, cut
from tests.support.sse import data_in

STREAMS = 500
SEED = 20261126
AGENT = "main-agent"  # the guarded agent replaces the built-in one: every wire (the UI stream too) runs it
QUESTION = "how do I reach the team?"


def _write_agent(directory: Path, guardrails: str) -> None:
    (directory / "guarded.yaml").write_text(
        f"key: {AGENT}\nname: Guarded\nmode: direct\nguardrails:\n{guardrails}", encoding="utf-8"
    )


def _context(tmp_path: Path, llm: ScriptedLlm, guardrails: str, **settings: Any) -> AppContext:
    _write_agent(tmp_path, guardrails)
    values = {"AGENT_DEFINITIONS_DIR": str(tmp_path), **settings}
    return build_context(make_settings(**values), table=MemoryTable(), llm=llm, audit=lambda _: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=30)


@dataclass(frozen=True)
class Wire:
    path: str
    body: Callable[[], dict[str, Any]]
    text: Callable[[dict[str, Any]], str]  # the answer text an event carries, in the wire's own form


def _chat_text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    return str((choices[0].get("delta") or {}).get("content") or "") if choices else ""


def _delta_of(kind: str) -> Callable[[dict[str, Any]], str]:
    return lambda event: str(event.get("delta") or "") if event.get("type") == kind else ""


WIRES: dict[str, Wire] = {
    "native": Wire("/api/ap/query", lambda: {"message": QUESTION}, _delta_of("content.delta")),
    "responses": Wire(
        "/v1/responses",
        lambda: {"model": AGENT, "input": QUESTION, "stream": True},
        _delta_of("response.output_text.delta"),
    ),
    "chat_completions": Wire(
        "/v1/chat/completions",
        lambda: {"model": AGENT, "stream": True, "messages": [{"role": "user", "content": QUESTION}]},
        _chat_text,
    ),
    "ui_stream": Wire(
        "/api/ui-stream",
        lambda: {
            "id": f"chat-{uuid.uuid4().hex}",
            "messages": [
                {"id": f"u-{uuid.uuid4().hex}", "role": "user", "parts": [{"type": "text", "text": QUESTION}]}
            ],
            "trigger": "submit-message",
        },
        _delta_of("text-delta"),
    ),
    "ag_ui": Wire(
        "/api/ag-ui",
        lambda: {
            "threadId": f"thread-{uuid.uuid4().hex}",
            "runId": f"run-{uuid.uuid4().hex}",
            "state": {},
            "messages": [{"id": f"m-{uuid.uuid4().hex}", "role": "user", "content": QUESTION}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        },
        _delta_of("TEXT_MESSAGE_CONTENT"),
    ),
}


@dataclass
class Streamed:
    wire: str
    body: str  # the whole SSE body as sent
    events: list[dict[str, Any]]
    text: str  # the answer as the client reads it
    stored: str | None = None  # native: the stored answer (the replay's raw assistant message)
    snapshot: str | None = None  # native: the replay's content snapshot


async def _stream(client: httpx.AsyncClient, name: str) -> Streamed:
    wire = WIRES[name]
    response = await client.post(wire.path, json=wire.body(), headers={"X-User-Id": "fuzz"})
    assert response.status_code == 200, response.text
    events = [json.loads(d) for d in data_in(response.text) if d != "[DONE]"]
    return Streamed(name, response.text, events, "".join(wire.text(e) for e in events))


def _expected(text: str) -> str:
    return masked(text, BuiltinAdapter.of(DETECTORS, []).find(text), "label")


async def _fuzz(tmp_path: Path, streams: int, **settings: Any) -> list[tuple[Streamed, list[str], str]]:
    """`streams` turns, round-robin over the wires; each with its answer's PII and the answer masked whole."""
    rng = random.Random(SEED)
    llm = ScriptedLlm()
    context = _context(tmp_path, llm, "  output: mask\n", **settings)
    names = list(WIRES)
    out = []
    async with _client(context) as client:
        for n in range(streams):
            text, secrets = answer(rng, words=(10, 120))
            llm.add(Reply(pieces=cut(rng, text)))
            streamed = await _stream(client, names[n % len(names)])
            if streamed.wire == "native":
                params = {"chatId": streamed.events[0]["chatId"], "includeRawMessages": "true"}
                replay = (await client.get("/api/ap/chat", params=params, headers={"X-User-Id": "fuzz"})).json()
                streamed.stored = next(m["content"] for m in replay["rawMessages"] if m["role"] == "assistant")
                streamed.snapshot = next(e["text"] for e in replay["events"] if e["type"] == "content.snapshot")
            out.append((streamed, [value for _, value in secrets], _expected(text)))
    return out


async def test_500_fuzzed_streams_leak_no_pii_on_any_wire(tmp_path: Path) -> None:
    results = await _fuzz(tmp_path, STREAMS)
    leaks = [(s.wire, v) for s, secrets, _ in results for v in secrets if v in s.text or v in s.body]
    assert leaks == []
    wrong = [(s.wire, s.text, expected) for s, _, expected in results if s.text != expected]
    assert wrong == []
    native = [s for s, _, _ in results if s.wire == "native"]
    assert native and all(s.stored == s.text == s.snapshot for s in native)  # stored = sent
    assert {s.wire for s, _, _ in results} == set(WIRES) and len(results) == STREAMS
    assert sum(len(secrets) for _, secrets, _ in results) > STREAMS  # every stream carried PII


async def test_without_a_hold_back_window_the_same_fuzz_sees_leaks(tmp_path: Path) -> None:
    """The fuzz can see a leak: with a window of 0 PII split across deltas goes out before it is whole."""
    results = await _fuzz(tmp_path, 50, AGENT_GUARDRAIL_HOLDBACK_CHARS=0)
    leaks = [v for s, secrets, _ in results for v in secrets if v in s.text]
    assert len(leaks) > 5
