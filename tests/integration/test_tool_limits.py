"""129 client tools (one over OpenAI's 128) on every wire that takes tools: a 4xx naming `tools`, before any work."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from agent_core.context import AppContext
from agent_core.wires.client_turn import client_chat_id
from tests.support.openai_stub import OpenAiStub

TOO_MANY = 129
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}


def _function(n: int) -> dict[str, Any]:
    return {"name": f"tool_{n}", "description": f"tool number {n}", "parameters": PARAMETERS}


def test_responses_refuses_129_tools(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    tools: list[Any] = [{"type": "function", **_function(n)} for n in range(TOO_MANY)]
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="main-agent", input="hi", tools=tools)
    assert refused.value.body["param"] == "tools" and refused.value.code == "invalid_request"  # type: ignore[index]
    assert openai_stub.requests == []


def test_chat_completions_refuses_129_tools(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    tools: list[Any] = [{"type": "function", "function": _function(n)} for n in range(TOO_MANY)]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "hi"}], tools=tools)
    assert refused.value.body["param"] == "tools" and refused.value.code == "invalid_request"  # type: ignore[index]
    assert openai_stub.requests == []


@pytest.mark.parametrize("agent", [None, "main-agent"])
def test_ag_ui_refuses_129_tools_before_any_work(
    base_url: str, openai_stub: OpenAiStub, context: AppContext, agent: str | None
) -> None:
    body = {
        "threadId": "t-many",
        "runId": "r-1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "tools": [_function(n) for n in range(TOO_MANY)],
        "context": [],
        "forwardedProps": {},
    }
    url = base_url.removesuffix("/v1") + "/api/ag-ui" + (f"/{agent}" if agent else "")
    refused = httpx.post(url, json=body, headers={"Authorization": "Bearer user-a"}, timeout=30)
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/json"
    error = refused.json()["error"]
    assert (error["code"], error["param"], error["type"]) == ("invalid_request", "tools", "invalid_request_error")
    assert "128" in error["message"]
    # Nothing ran and nothing was written: no model call, no chat for the thread
    assert openai_stub.requests == []
    assert asyncio.run(context.deps.chats.get_chat(client_chat_id("user-a", "t-many"), "user-a")) is None
    # 128 tools are fine
    body["tools"] = body["tools"][:128]
    assert httpx.post(url, json=body, headers={"Authorization": "Bearer user-a"}, timeout=30).status_code == 200
