"""The shipped example agent loads, and its MCP stdio server (mcp-server-time) serves a run with progressive answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agent_core.context import build_context
from agent_core.runtime.agents import load_definitions
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.runs import run_turn, text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


def test_example_agents_validate() -> None:
    agents = {a.key: a for a in load_definitions(str(EXAMPLES))}
    assert list(agents) == ["careful-writer", "support-desk", "world-clock"]
    clock, support = agents["world-clock"], agents["support-desk"]
    assert clock.compose == "progressive" and clock.mcp_servers[0].transport == "stdio"
    assert support.guardrails is not None and support.guardrails.patterns[0].name == "EMPLOYEE_ID"
    # The careful writer's policies: fetches outside example.com, files over 100 KB, one MCP tool always
    policies = agents["careful-writer"].approval_policies()
    assert sorted(policies) == ["clock__convert_time", "http_get", "save_file"]
    fetch, save = policies["http_get"], policies["save_file"]
    assert fetch.reason("http_get", {"url": "https://evil.example.net/x"}) == "a fetch outside example.com"
    assert fetch.reason("http_get", {"url": "https://docs.example.com/x"}) is None
    assert fetch.reason("http_get", {"url": "https://example.com"}) is None
    assert save.reason("save_file", {"name": "a.txt", "content": "x" * 102400}) is None
    assert save.reason("save_file", {"name": "a.txt", "content": "x" * 102401}) == "a file over 100 KB"
    assert policies["clock__convert_time"].reason("clock__convert_time", {}) is not None


async def test_the_support_desk_masks_the_message_and_the_answer() -> None:
    llm = ScriptedLlm(Reply(text="I forwarded EMP-123456 to ops@example.com; they call +1 415-555-0134 back."))
    context = build_context(
        make_settings(AGENT_DEFINITIONS_DIR=str(EXAMPLES)), table=MemoryTable(), llm=llm, audit=lambda _: None
    )
    events = await run_turn(context, "support-desk", "I am EMP-654321, card 4111 1111 1111 1111")
    assert events[0]["message"] == "I am {EMPLOYEE_ID}, card {CARD}"
    assert llm.requests[0].messages[-1]["content"] == "I am {EMPLOYEE_ID}, card {CARD}"
    assert text(events) == "I forwarded {EMPLOYEE_ID} to {EMAIL}; they call {PHONE} back."


async def test_world_clock_runs_an_mcp_stdio_tool_and_the_builtin_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make run` puts the venv first on PATH, so the example's `python` has mcp-server-time
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    llm = ScriptedLlm(
        Reply(
            tool_calls=[
                ("c_mcp", "clock__get_current_time", {"timezone": "Europe/London"}),
                ("c_builtin", "time", {"timezone": "Asia/Tokyo"}),
            ]
        ),
        Reply(text="London first."),
        Reply(text="Also, Tokyo."),
    )
    context = build_context(
        make_settings(AGENT_DEFINITIONS_DIR=str(EXAMPLES)), table=MemoryTable(), llm=llm, audit=lambda _: None
    )
    events = await run_turn(context, "world-clock", "compare London and Tokyo")
    results = {e["toolId"]: e for e in events if e["type"] == "tool.result"}
    assert results["c_mcp"]["status"] == "ok" and "Europe/London" in str(results["c_mcp"]["result"])
    assert results["c_builtin"]["status"] == "ok"
    starts = {e["toolId"]: e["toolType"] for e in events if e["type"] == "tool.start"}
    assert starts == {"c_mcp": "mcp", "c_builtin": "backend"}
    assert text(events).startswith("Let me look that up.")
    assert events[-1]["type"] == "run.complete"
