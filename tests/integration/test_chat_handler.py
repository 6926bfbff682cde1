"""The chat Lambda handler with real API Gateway and Function URL event shapes, on moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from agent_core.config import get_settings
from agent_core.store.embedded import ensure_resources
from tests.support.lambda_events import FakeLambdaContext, http_v2_event, rest_v1_event


@pytest.fixture
def handler(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # Given the environment the stack gives the chat function
    for name, value in {
        "AWS_LAMBDA_FUNCTION_NAME": "agent-core-chat",
        "AGENT_TABLE_NAME": "agent-core-test",
        "AGENT_DATA_BUCKET": "agent-core-test-data",
        "AGENT_STORAGE": "aws",
        "AGENT_LLM_PROVIDER": "offline",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "AgentCore",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    settings = get_settings()
    ensure_resources(settings, boto3.client("dynamodb"), boto3.client("s3"))
    from functions.chat import handler as module

    module._asgi.app.state.context = None  # a fresh cold start for each test
    yield module.handler
    module._asgi.app.state.context = None
    get_settings.cache_clear()


def _json(response: dict[str, Any]) -> Any:
    return json.loads(response["body"]) if response.get("body") else None


def test_rest_v1_events_create_chat_and_list(handler: Any) -> None:
    ctx = FakeLambdaContext()
    created = handler(rest_v1_event("POST", "/api/v1/conversations", {"title": "rest"}, {"X-User-Id": "u1"}), ctx)
    assert created["statusCode"] == 201
    cid = _json(created)["conversationId"]
    chat = handler(
        rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "现在几点了"}, {"X-User-Id": "u1"}), ctx
    )
    assert chat["statusCode"] == 200
    body = _json(chat)
    assert body["assistantMessage"].startswith("[offline model]")
    assert body["toolCalls"][0]["toolName"] == "time"
    listed = handler(rest_v1_event("GET", "/api/v1/conversations", None, {"X-User-Id": "u1"}, {"limit": "5"}), ctx)
    assert [i["conversationId"] for i in _json(listed)["items"]] == [cid]


def test_function_url_v2_events_and_ownership(handler: Any) -> None:
    ctx = FakeLambdaContext()
    created = handler(http_v2_event("POST", "/api/v1/conversations", {}, {"authorization": "Bearer alice"}), ctx)
    cid = _json(created)["conversationId"]
    ok = handler(
        http_v2_event("GET", f"/api/v1/conversations/{cid}/messages", None, {"authorization": "Bearer alice"}), ctx
    )
    assert ok["statusCode"] == 200
    foreign = handler(http_v2_event("GET", f"/api/v1/conversations/{cid}", None, {"authorization": "Bearer bob"}), ctx)
    assert foreign["statusCode"] == 404
    assert _json(foreign)["error"]["code"] == "conversation_not_found"


def test_bad_body_through_the_handler_is_the_mapped_422(handler: Any) -> None:
    ctx = FakeLambdaContext()
    cid = _json(handler(http_v2_event("POST", "/api/v1/conversations", {}), ctx))["conversationId"]
    event = http_v2_event("POST", f"/api/v1/conversations/{cid}/chat")
    event["body"] = '{"message": '
    response = handler(event, ctx)
    assert response["statusCode"] == 422
    assert _json(response)["error"]["param"] == "body"
