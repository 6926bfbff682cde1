"""A whole turn through the real openai SDK against the loopback stub, on the moto table."""

from __future__ import annotations

from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.dynamodb import DynamoTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript


def _app(stub: OpenAiStub, table: DynamoTable, **overrides: Any) -> httpx.AsyncClient:
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="sk-test-secret", **overrides
    )
    llm = OpenAiLlmClient(settings)
    context = build_context(settings, table=table, llm=llm, audit=lambda line: None)
    app = build_app(*routes.chat, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers={"X-User-Id": "u"})


async def test_two_parallel_tool_calls_with_split_arguments_through_the_sdk(
    openai_stub: OpenAiStub, moto_table: DynamoTable
) -> None:
    # Given a model that streams two interleaved tool calls, then an answer
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_sh", "name": "time", "arguments": {"timezone": "Asia/Shanghai"}},
                {"id": "call_ny", "name": "time", "arguments": {"timezone": "America/New_York"}},
            ],
            piece_size=5,
            interleave=True,
        ),
        StubScript.text("Shanghai is ahead ", "of New York."),
    )
    async with _app(openai_stub, moto_table) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        # When the user asks
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "compare times"})
        # Then both tools ran and the answer is the model's final text
        body = response.json()
        assert response.status_code == 200, body
        assert body["assistantMessage"] == "Shanghai is ahead of New York."
        assert sorted((c["id"], c["status"]) for c in body["toolCalls"]) == [("call_ny", "ok"), ("call_sh", "ok")]
        # And the second request carried the assistant tool calls and both results
        second = openai_stub.requests[1]["messages"]
        calls = next(m for m in second if m["role"] == "assistant" and m.get("tool_calls"))["tool_calls"]
        assert [c["function"]["arguments"] for c in calls] == [
            '{"timezone": "Asia/Shanghai"}',
            '{"timezone": "America/New_York"}',
        ]
        assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["call_sh", "call_ny"]
        assert openai_stub.requests[0]["stream_options"] == {"include_usage": True}
        messages = (await client.get(f"/api/v1/conversations/{cid}/messages")).json()["items"]
        assert [m["role"] for m in messages] == ["USER", "ASSISTANT", "TOOL", "TOOL", "ASSISTANT"]


async def test_429_then_success_answers(openai_stub: OpenAiStub, moto_table: DynamoTable) -> None:
    openai_stub.enqueue(StubScript.error(429), StubScript.text("after retry"))
    async with _app(openai_stub, moto_table) as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"})
        assert response.json()["assistantMessage"] == "after retry"
        assert len(openai_stub.requests) == 2


async def test_persistent_500_is_502_with_the_user_message_stored_and_the_lease_released(
    openai_stub: OpenAiStub, moto_table: DynamoTable
) -> None:
    openai_stub.enqueue(*[StubScript.error(500) for _ in range(4)])
    async with _app(openai_stub, moto_table, AGENT_LLM_MAX_RETRIES="3") as client:
        cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi"})
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "llm_unavailable" and "sk-test-secret" not in error["message"]
        assert len(openai_stub.requests) == 4
        messages = (await client.get(f"/api/v1/conversations/{cid}/messages")).json()["items"]
        assert [m["role"] for m in messages] == ["USER"]
        # The lease was released: the next turn runs (the stub's default reply)
        ok = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "again"})
        assert ok.status_code == 200 and ok.json()["assistantMessage"] == "stub reply"
