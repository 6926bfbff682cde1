"""Seed 001's history questions with no day named, in Chinese and English: the history quick rule answers
them from the records with no routing call (the only model call is the answer), over the real openai SDK
and a loopback stub.

上次 / "last time" is the latest day with records before today; 之前 / "before" the last 7 days through today;
"what I said" (我说的) is a question about the conversation like 聊了什么.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import DailySummary
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.memory_table import MemoryTable
from tests.integration.test_routing import MAIN_TOOLS, assert_grammar, offered
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.sse import events_in

TODAY = "2026-01-08T09:00:00+08:00"


def _context(stub: OpenAiStub) -> AppContext:
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=stub.base_url,
        OPENAI_API_KEY="k",
        AGENT_STAGE="dev",
        AGENT_ALLOW_CLOCK_OVERRIDE="true",
        AGENT_DEFAULT_TIMEZONE="Asia/Shanghai",
    )
    context = build_context(settings, table=MemoryTable(), audit=lambda _: None)
    context.deps.agents = AgentCatalog([AgentDefinition(key="main", name="Main", tools=MAIN_TOOLS)])
    return context


async def _ask(context: AppContext, message: str, now: str) -> list[dict[str, Any]]:
    app = build_app(*routes.local, context=context)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": "alice"}
    ) as client:
        response = await client.post(
            "/api/ap/query", json={"message": message, "agentKey": "main"}, headers={"X-Agent-Now": now}
        )
    assert response.status_code == 200, response.text
    return events_in(response.text)


async def _history(stub: OpenAiStub) -> AppContext:
    """Alice's records: a daily summary on the 5th; on the 7th (yesterday) a chat not summarised yet."""
    context = _context(stub)
    await context.deps.memory_store.put_daily(
        DailySummary(
            user_id="alice", date="2026-01-05", summary="用户计划去京都看樱花。", key_topics=["京都"], updated_at=0
        )
    )
    stub.enqueue(StubScript.text("好的，记下了。"))
    await _ask(context, "医生给我开的药是布洛芬缓释胶囊", "2026-01-07T20:00:00+08:00")
    return context


def _records_prompt(stub: OpenAiStub) -> str:
    return "\n".join(m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "system")


@pytest.mark.parametrize("message", ["上次我们聊了什么？", "What did we talk about last time?"])
async def test_last_time_is_answered_from_the_latest_day_with_records(openai_stub: OpenAiStub, message: str) -> None:
    context = await _history(openai_stub)
    before = len(openai_stub.requests)
    openai_stub.enqueue(StubScript.text("上次你说医生开了布洛芬。"))
    events = await _ask(context, message, TODAY)
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "time_query"
    assert len(openai_stub.requests) == before + 1, "no routing call: the answer is the only model call"
    assert offered(openai_stub.requests[-1]) == []
    prompt = _records_prompt(openai_stub)
    assert "(2026-01-07)" in prompt and "布洛芬缓释胶囊" in prompt
    assert "京都" not in prompt, "only the latest day with records"
    assert_grammar(events)


@pytest.mark.parametrize("message", ["我们之前聊过什么？", "What did we talk about before?"])
async def test_before_is_answered_from_the_recent_days(openai_stub: OpenAiStub, message: str) -> None:
    context = await _history(openai_stub)
    before = len(openai_stub.requests)
    openai_stub.enqueue(StubScript.text("我们聊过京都和布洛芬。"))
    events = await _ask(context, message, TODAY)
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "time_query"
    assert len(openai_stub.requests) == before + 1 and offered(openai_stub.requests[-1]) == []
    prompt = _records_prompt(openai_stub)
    assert "2026-01-02 to 2026-01-08" in prompt  # the last 7 days, today included
    assert "用户计划去京都看樱花。" in prompt and "布洛芬缓释胶囊" in prompt
    assert_grammar(events)


@pytest.mark.parametrize("message", ["昨天我说的药具体叫什么？", "What was the medicine I mentioned yesterday called?"])
async def test_what_i_said_yesterday_is_answered_from_the_exact_messages(openai_stub: OpenAiStub, message: str) -> None:
    context = await _history(openai_stub)
    before = len(openai_stub.requests)
    openai_stub.enqueue(StubScript.text("布洛芬缓释胶囊。"))
    events = await _ask(context, message, TODAY)
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "time_query"
    assert len(openai_stub.requests) == before + 1 and offered(openai_stub.requests[-1]) == []
    prompt = _records_prompt(openai_stub)
    assert "(2026-01-07)" in prompt and "User: 医生给我开的药是布洛芬缓释胶囊" in prompt
    assert_grammar(events)


async def test_a_mixed_message_with_last_time_looks_up_that_day_beside_the_answer(openai_stub: OpenAiStub) -> None:
    context = await _history(openai_stub)
    openai_stub.enqueue(StubScript.text("上次聊了布洛芬；现在东京是十点。"))
    events = await _ask(context, "上次我们聊了什么？另外东京现在几点？", TODAY)
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "function" and route["matchedTools"][0] == "search_chat_history"
    result = next(e for e in events if e["type"] == "tool.result" and e["toolId"] == "quick_0")
    assert result["status"] == "ok" and result["result"]["start"] == "2025-12-09"
    assert "布洛芬缓释胶囊" in result["result"]["records"] and "京都" not in result["result"]["records"]
    assert_grammar(events)
