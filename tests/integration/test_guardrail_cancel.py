"""A cancelled guarded run keeps its answer as far as the client saw it: the masked, released text, never what
was still held back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import sse_events

EMAIL = "fay.hill@example.com"


@pytest.fixture
def guarded(openai_stub: OpenAiStub, tmp_path: Path) -> Iterator[httpx.Client]:
    (tmp_path / "g.yaml").write_text("key: main-agent\nname: G\nmode: direct\nguardrails:\n  output: mask\n")
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=openai_stub.base_url,
        OPENAI_API_KEY="sk-t",
        AGENT_DEFINITIONS_DIR=str(tmp_path),
        AGENT_GUARDRAIL_HOLDBACK_CHARS="40",
    )
    context = build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda line: None)
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as client,
    ):
        yield client


def test_a_cancelled_run_stores_what_the_client_saw(guarded: httpx.Client, openai_stub: OpenAiStub) -> None:
    release = threading.Event()
    answer = f"Write to {EMAIL} for help. " + "".join(f"w{i:03d} " for i in range(60))
    pieces = [answer[i : i + 5] for i in range(0, len(answer), 5)]
    script = StubScript.text(*pieces)
    script.before_chunk = lambda seq: release.wait(timeout=10) if seq == 30 else None  # ~145 characters sent
    openai_stub.enqueue(script)
    events: list[dict[str, Any]] = []
    with guarded.stream("POST", "/api/ap/query", json={"message": "help?"}) as response:
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "content.delta" and "{EMAIL}" in event["delta"]:
                assert guarded.post("/api/ap/cancel", json={"runId": event["runId"]}).json()["accepted"] is True
                release.set()
    release.set()
    assert events[-1]["type"] == "run.cancel"
    seen = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    assert seen.startswith("Write to {EMAIL} for help.") and EMAIL not in seen
    assert len(seen) < len(answer) - 40  # the run stopped part way, some text still held back
    raw = guarded.get("/api/ap/chat", params={"chatId": events[0]["chatId"], "includeRawMessages": "true"}).json()
    stored = [m["content"] for m in raw["rawMessages"] if m["role"] == "assistant"]
    assert stored == [seen]
