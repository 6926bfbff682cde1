"""What a new caller meets first: errors that name the field they sent, a readable answer to a body that is
not JSON, one-day ranges read as one day, and a stateless route that offers no tool it could never finish."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.sse import events_in

AGENT = """
key: helper
name: Helper
tools: [time, ask_user]
frontendTools:
  - name: pick_color
    description: The user picks a colour in the browser.
actions:
  - name: highlight
    description: Highlight a cell.
"""


def _context(llm: Any = None, **settings: str) -> AppContext:
    return build_context(make_settings(**settings), table=MemoryTable(), llm=llm or ScriptedLlm(), audit=lambda _: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def _error(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_unknown_ids_name_the_field_the_caller_sent() -> None:
    async with _client(_context()) as client:
        query = await client.post("/api/ap/query", json={"message": "hi", "chatId": "c_nope"})
        chat = await client.post("/api/v1/conversations/c_nope/chat", json={"message": "hi"})
        agent_key = await client.post("/api/ap/query", json={"message": "hi", "agentKey": "nobody"})
        agent_name = await client.post(
            "/api/chat/stream", json={"messages": [{"role": "user", "content": "hi"}], "agentName": "nobody"}
        )
    assert query.status_code == 404 and _error(query)["param"] == "chatId"
    assert chat.status_code == 404 and _error(chat)["param"] == "conversationId"
    assert agent_key.status_code == 404 and _error(agent_key)["param"] == "agentKey"
    assert agent_name.status_code == 404 and _error(agent_name)["param"] == "agentName"
    assert _error(agent_name)["code"] == "agent_not_found" and "main-agent" in _error(agent_name)["message"]


@pytest.mark.parametrize(
    ("path", "status", "headers"),
    [
        ("/api/ap/query", 422, {}),
        ("/api/ap/query", 422, {"content-type": "text/plain"}),
        ("/v1/responses", 400, {"content-type": "application/x-www-form-urlencoded"}),
    ],
)
async def test_a_body_without_a_json_content_type_gets_a_readable_message(
    path: str, status: int, headers: dict[str, str]
) -> None:
    async with _client(_context()) as client:
        response = await client.post(path, content=b'{"message": "hi", "input": "hi"}', headers=headers)
    assert response.status_code == status
    error = _error(response)
    assert (error["code"], error["param"]) == ("invalid_content_type", "body")
    assert "Content-Type: application/json" in error["message"]
    assert f"this request's Content-Type: {headers.get('content-type', 'none')}" in error["message"]


async def test_a_one_day_range_reads_as_one_day() -> None:
    async with _client(_context(AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true")) as client:
        now = {"X-Agent-Now": "2026-01-08T03:00:00+00:00"}
        one = await client.post("/api/ap/query", json={"message": "what did we talk about yesterday?"}, headers=now)
        week = await client.post("/api/ap/query", json={"message": "what did we talk about last week?"}, headers=now)
        chinese = await client.post("/api/ap/query", json={"message": "昨天我们聊了什么？"}, headers=now)
    assert "I found no conversations from yesterday (2026-01-07)." in one.text
    assert next(e for e in events_in(one.text) if e["type"] == "run.route")["reason"] == "history of 2026-01-07"
    assert "I found no conversations from last week (2026-01-01 to 2026-01-07)." in week.text
    assert "我没有找到昨天（2026-01-07）的聊天记录。" in chinese.text


async def test_the_stateless_route_offers_no_frontend_tool_and_keeps_the_others(tmp_path: Path) -> None:
    """Nothing is stored there, so a submit could never reach the run's wait: frontend tools are not offered."""
    (tmp_path / "helper.yaml").write_text(AGENT, encoding="utf-8")
    # The chain: intent (tool branch), one native-tools step, enhancement; then the stored route's turn.
    intent = Reply(text='{"mode": "react", "reason": "tools fit"}')
    llm = ScriptedLlm(intent, Reply(text="stateless"), Reply(text="enhanced"), Reply(text="stored"))
    async with _client(_context(llm, AGENT_DEFINITIONS_DIR=str(tmp_path))) as client:
        stateless = await client.post(
            "/api/chat/stream",
            json={"messages": [{"role": "user", "content": "hello"}], "agentName": "helper", "strategy": "function"},
        )
        stored = await client.post("/api/ap/query", json={"message": "hello", "agentKey": "helper"})
    assert stateless.status_code == stored.status_code == 200
    offered = [{t["function"]["name"] for t in request.tools} for request in llm.requests]
    assert offered[1] == {"time", "highlight"}
    assert offered[3] == {"time", "ask_user", "pick_color", "highlight"}, "the stored route keeps them all"
