"""Agents end to end: a YAML agent with MCP tools, the agents list, the stateless chain endpoint, startup refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.api.auth import LOCAL_USER
from agent_core.context import build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.mcp_server import mcp_http_server
from tests.support.runs import run_turn, text
from tests.support.server import free_port
from tests.support.sse import events_in


def _write_agent(directory: Path, mcp_url: str, dead_url: str) -> None:
    (directory / "calc.yaml").write_text(
        f"""
key: calc-agent
name: Calculator
description: Adds numbers with an MCP server.
mode: function
version: "7"
systemPrompt: You add numbers.
tools: [time]
mcpServers:
  - name: calc
    url: {mcp_url}
  - name: dead
    url: {dead_url}
actions:
  - name: highlight
    description: Highlight a cell.
    parameters: {{type: object, properties: {{cell: {{type: string}}}}, required: [cell]}}
""",
        encoding="utf-8",
    )


async def test_yaml_agent_with_mcp_tools_and_a_dead_server(tmp_path: Path) -> None:
    dead_url = f"http://127.0.0.1:{free_port()}/mcp"
    with mcp_http_server() as (url, _probe):
        _write_agent(tmp_path, url, dead_url)
        llm = ScriptedLlm(Reply(tool_calls=[("c1", "calc__add", {"a": 2, "b": 3})]), Reply(text="2 + 3 = 5"))
        settings = make_settings(AGENT_DEFINITIONS_DIR=str(tmp_path))
        context = build_context(settings, table=MemoryTable(), llm=llm, audit=lambda _: None)
        events = await run_turn(context, "calc-agent", "add 2 and 3")
    warning = next(e for e in events if e["type"] == "run.warning")
    assert warning["code"] == "mcp_unavailable" and "dead" in warning["message"]
    declared = {t["function"]["name"] for t in llm.requests[0].tools}
    assert {"calc__add", "calc__fail", "time", "highlight"} <= declared
    start = next(e for e in events if e["type"] == "tool.start")
    assert (start["toolName"], start["toolType"]) == ("calc__add", "mcp")
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"] == {"result": 5}
    assert text(events) == "2 + 3 = 5" and events[-1]["type"] == "run.complete"
    run = (await context.deps.turns.list_runs(events[0]["chatId"], 10, None))[0][0]
    assert (run.agent_key, run.agent_version) == ("calc-agent", "7")


async def test_agents_list_and_the_stateless_chain_endpoint(tmp_path: Path) -> None:
    _write_agent(tmp_path, "http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp")
    llm = ScriptedLlm(
        Reply(text='{"mode": "react", "reason": "r"}'),
        Reply(text='{"thought": "t", "action": "final_answer", "action_input": "forty-two"}'),
        Reply(text="Forty-two."),
    )
    table = MemoryTable()
    context = build_context(
        make_settings(AGENT_DEFINITIONS_DIR=str(tmp_path)), table=table, llm=llm, audit=lambda _: None
    )
    app = build_app(*routes.local, context=context)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        agents = (await client.get("/api/ap/agents")).json()["items"]
        by_key = {a["key"]: a for a in agents}
        assert set(by_key) == {"main-agent", "calc-agent"}
        assert by_key["calc-agent"]["mode"] == "function" and "calc__*" in by_key["calc-agent"]["tools"]
        body = {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "answer?"},
            ],
            "strategy": "prompt",
            "reactVerbose": True,
        }
        response = await client.post("/api/chat/stream", json=body)
        assert response.status_code == 200
        await context.background.join()
    events = events_in(response.text)
    assert [e["type"] for e in events if e["type"] == "react.step"] == ["react.step"]
    assert text(events) == "Forty-two." and events[-1]["type"] == "run.complete"
    sent = llm.requests[0].messages
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")][:3] == ["hi", "hello", "answer?"]
    # The stateless endpoint stores nothing of the chat; its model use is counted as any run's is (the usage
    # ledger, once per run: the run's marker, the day's row and the day's budget item) and nothing else.
    assert context.deps.usage is not None
    today = datetime.now(UTC).date().isoformat()
    [row] = await context.deps.usage.ledger.rows(LOCAL_USER, today, today)
    assert row.runs == 1
    assert table.item_count() == 3, "the stateless endpoint stores nothing but its usage record"


def test_invalid_agent_yaml_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("key: broken\nname: Broken\nmaxSteps: 0\n")
    env: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    env["AGENT_DEFINITIONS_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "serve", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode != 0
    assert "broken.yaml" in result.stderr and "maxSteps" in result.stderr
