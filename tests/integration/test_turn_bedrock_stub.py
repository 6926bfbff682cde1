"""Whole turns, every strategy and the rolling summary on the Bedrock provider: the real boto3 client
against the loopback ConverseStream stub."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Summary
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table import Table
from tests.integration.test_routing import assert_grammar
from tests.support.bedrock_stub import BedrockCall, BedrockScript, BedrockStub
from tests.support.fixtures import make_settings
from tests.support.runs import run_turn, text
from tests.support.wait import apoll_until

MODEL = "amazon.nova-pro-v1:0"


def _context(table: Table | None = None, **overrides: Any) -> AppContext:
    settings = make_settings(AGENT_LLM_PROVIDER="bedrock", AGENT_MODEL=MODEL, **overrides)
    return build_context(settings, table=table or MemoryTable(), audit=lambda line: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.chat, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": "u"})


def _json(value: dict[str, Any]) -> BedrockScript:
    return BedrockScript.text(json.dumps(value))


def _decision(action: str, action_input: Any) -> BedrockScript:
    return _json({"thought": "t", "action": action, "action_input": action_input})


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["toolSpec"]["name"] for t in body.get("toolConfig", {}).get("tools", [])]


async def test_two_tool_calls_then_an_answer_through_the_chat_api_on_dynamodb(
    bedrock_stub: BedrockStub, moto_table: DynamoTable
) -> None:
    # Given a model that asks for two tools, then answers
    bedrock_stub.enqueue(
        BedrockScript.tool_calls(
            [
                {"id": "tu_sh", "name": "time", "input": {"timezone": "Asia/Shanghai"}},
                {"id": "tu_ny", "name": "time", "input": {"timezone": "America/New_York"}},
            ],
            piece_size=5,
        ),
        BedrockScript.text("Shanghai is ahead ", "of New York.", usage=(40, 8, 30, 0)),
    )
    context = _context(moto_table)
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        # When the user asks
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "compare the clocks"})
        body = response.json()
        # Then both tools ran and the answer is the model's final text
        assert response.status_code == 200, body
        assert body["assistantMessage"] == "Shanghai is ahead of New York."
        assert sorted((c["id"], c["status"]) for c in body["toolCalls"]) == [("tu_ny", "ok"), ("tu_sh", "ok")]
        messages = (await client.get(f"/api/v1/conversations/{cid}/messages")).json()["items"]
        assert [m["role"] for m in messages] == ["USER", "ASSISTANT", "TOOL", "TOOL", "ASSISTANT"]
    # And the second call sent the tool uses back with their ids, and both results in one user message
    second = bedrock_stub.requests[1]["messages"]
    uses = [b["toolUse"]["toolUseId"] for m in second for b in m["content"] if "toolUse" in b]
    results = [b["toolResult"]["toolUseId"] for m in second for b in m["content"] if "toolResult" in b]
    assert uses == ["tu_sh", "tu_ny"] and results == ["tu_sh", "tu_ny"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert all(call.model_id == MODEL for call in bedrock_stub.calls)
    # And the run record holds both calls' usage, cache reads included
    runs, _ = await context.deps.turns.list_runs(cid, 10, None)
    [run] = runs
    assert (run.usage.prompt_tokens, run.usage.completion_tokens, run.usage.cache_read_tokens) == (60, 17, 30)


async def test_throttling_is_retried_inside_a_turn(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.error(429, "ThrottlingException"), BedrockScript.text("after retry"))
    context = _context(AGENT_LLM_MAX_RETRIES="1")
    context.deps.llm._sleep = _no_sleep  # type: ignore[attr-defined]
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"})
    assert response.json()["assistantMessage"] == "after retry" and len(bedrock_stub.calls) == 2


async def test_a_failure_mid_stream_is_a_terminal_error_with_the_user_message_kept(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.interrupted("half an "))
    context = _context()
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"})
        assert response.status_code == 502 and response.json()["error"]["code"] == "llm_unavailable"
        messages = (await client.get(f"/api/v1/conversations/{cid}/messages")).json()["items"]
    assert [m["role"] for m in messages] == ["USER"]
    assert len(bedrock_stub.calls) == 1, "no retry after output started"


@pytest.mark.parametrize(
    ("script", "code"),
    [
        (BedrockScript.error(400, "ValidationException", "messages: malformed"), "llm_request_invalid"),
        (BedrockScript.error(403, "AccessDeniedException", "not authorized"), "llm_access_denied"),
    ],
)
async def test_refusals_are_502_with_their_code_on_the_blocking_route(
    bedrock_stub: BedrockStub, script: BedrockScript, code: str
) -> None:
    bedrock_stub.enqueue(script)
    async with _client(_context()) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"})
    assert response.status_code == 502 and response.json()["error"]["code"] == code


async def _no_sleep(seconds: float) -> None:
    return None


async def test_the_react_strategy(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(
        _decision("tool_call", {"tool_name": "time", "parameters": {"timezone": "UTC"}}),
        _decision("final_answer", "It is noon in UTC."),
    )
    context = _context()
    context.deps.agents = AgentCatalog([AgentDefinition(key="r", name="R", mode="react", tools=["time"])])
    events = await run_turn(context, "r", "clock check please")
    assert [e["toolName"] for e in events if e["type"] == "tool.start"] == ["time"]
    assert text(events) == "It is noon in UTC." and events[-1]["type"] == "run.complete"
    assert len(bedrock_stub.calls) == 2 and not any(_offered(r) for r in bedrock_stub.requests)
    assert_grammar(events)


async def test_the_direct_strategy_streams_deltas_and_reasoning(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.text("Par", "is.", reasoning=["France's ", "capital"]))
    context = _context()
    context.deps.agents = AgentCatalog([AgentDefinition(key="d", name="D", mode="direct")])
    events = await run_turn(context, "d", "capital of France?")
    assert [e["delta"] for e in events if e["type"] == "content.delta"] == ["Par", "is."]
    assert "".join(e["delta"] for e in events if e["type"] == "reasoning.delta") == "France's capital"
    assert events[-1]["type"] == "run.complete" and len(bedrock_stub.calls) == 1
    assert_grammar(events)


async def test_the_function_strategy_offers_the_agent_tools(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(
        BedrockScript.tool_calls([{"id": "tu_1", "name": "time", "input": {"timezone": "UTC"}}]),
        BedrockScript.text("Noon."),
    )
    context = _context()
    context.deps.agents = AgentCatalog([AgentDefinition(key="f", name="F", mode="function", tools=["time"])])
    events = await run_turn(context, "f", "clock check please")
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["tu_1"]
    assert text(events) == "Noon." and [_offered(r) for r in bedrock_stub.requests] == [["time"], ["time"]]
    assert_grammar(events)


async def test_the_chain_strategy(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(
        _json({"mode": "react", "reason": "needs a tool"}),
        _decision("tool_call", {"tool_name": "time", "parameters": {"timezone": "Asia/Tokyo"}}),
        _decision("final_answer", "raw: 13:00 in Tokyo"),
        BedrockScript.text("It is **13:00** in Tokyo."),
    )
    context = _context()
    context.deps.agents = AgentCatalog([AgentDefinition(key="c", name="C", mode="chain", tools=["time"])])
    events = await run_turn(context, "c", "clock in Tokyo please")
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "chain"
    assert [e["toolName"] for e in events if e["type"] == "tool.start"] == ["time"]
    assert text(events) == "It is **13:00** in Tokyo." and len(bedrock_stub.calls) == 4
    assert_grammar(events)


async def test_the_compaction_job_summarises_on_bedrock_and_the_summary_joins_the_cached_prefix(
    bedrock_stub: BedrockStub,
) -> None:
    # Given a model that answers the compaction job's summary calls with a numbered summary
    def summaries(call: BedrockCall) -> BedrockScript | None:
        if not _summary_call(call):
            return None
        count = sum(_summary_call(c) for c in bedrock_stub.calls)
        return _json({"summary": f"Summary number {count}.", "keyTopics": ["questions"]})

    bedrock_stub.responder = summaries
    context = _context(AGENT_MEMORY_WINDOW="2", AGENT_MEMORY_COMPACT_AFTER="2")
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        for version, message in enumerate(("first question", "second question", "third question")):
            response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": message})
            assert response.status_code == 200
            if version:
                # When the compaction job (queued by the turn) has written its summary
                stored = await _summary_at_least(context, cid, version)
                assert stored.content == f"Summary number {version}."
        await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "fourth"})
    # Then the summary calls offered no tools, and the next turn sends the summary before the cache point
    assert all("toolConfig" not in c.body for c in bedrock_stub.calls if _summary_call(c))
    system = [c for c in bedrock_stub.calls if not _summary_call(c)][-1].body["system"]
    assert system[-1] == {"cachePoint": {"type": "default"}}
    assert any("Summary number 2." in block.get("text", "") for block in system[:-1])


def _summary_call(call: BedrockCall) -> bool:
    return str(call.body["system"][0]["text"]).startswith("You maintain the memory")


async def _summary_at_least(context: AppContext, chat_id: str, version: int) -> Summary:
    """The chat's summary once its version reaches `version` (the job is queued after the response)."""

    async def reached() -> Summary | None:
        await context.background.join()
        summary = await context.deps.memory_store.get_summary(chat_id)
        return summary if summary is not None and summary.version >= version else None

    return await apoll_until(reached, f"summary version {version}")


async def test_a_call_without_tools_after_a_tool_turn_sends_the_history_as_text(bedrock_stub: BedrockStub) -> None:
    # Given a chain agent whose first turn ran a native tool call (stored as a tool call and its result)
    bedrock_stub.enqueue(
        _json({"mode": "react", "reason": "needs a tool"}),
        BedrockScript.tool_calls([{"id": "tu_1", "name": "time", "input": {"timezone": "UTC"}}]),
        BedrockScript.text("raw"),
        BedrockScript.text("It is noon."),
        _json({"mode": "direct", "reason": "small talk"}),
        BedrockScript.text("You are welcome."),
    )
    context = _context()
    agent = AgentDefinition(key="main-agent", name="M", mode="chain", strategy="function", tools=["time"])
    context.deps.agents = AgentCatalog([agent])
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        first = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "clock please"})
        assert first.status_code == 200 and first.json()["assistantMessage"] == "It is noon."
        # When the next turn's intent call (no tools declared) carries that history
        second = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "thanks"})
    # Then Bedrock accepted it (the stub refuses tool blocks without toolConfig, as Converse does)
    assert second.status_code == 200, second.json()
    assert second.json()["assistantMessage"] == "You are welcome."
    intent = bedrock_stub.requests[4]
    assert "toolConfig" not in intent
    texts = [b.get("text", "") for m in intent["messages"] for b in m["content"]]
    assert any(t.startswith("[called tool time") for t in texts) and any(t.startswith("[result of time") for t in texts)
