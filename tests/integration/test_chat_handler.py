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


def _saved_file_link(handler: Any, event_for: Any) -> str:
    """Chat `save ... notes.txt: ...` (the save_file quick rule) and return the link in the stored tool result."""
    ctx = FakeLambdaContext()
    cid = _json(handler(event_for("POST", "/api/v1/conversations", {}), ctx))["conversationId"]
    chat = handler(event_for("POST", f"/api/v1/conversations/{cid}/chat", {"message": "save it as notes.txt: hi"}), ctx)
    assert chat["statusCode"] == 200, chat
    assert [c["toolName"] for c in _json(chat)["toolCalls"]] == ["save_file"]
    listed = _json(handler(event_for("GET", f"/api/v1/conversations/{cid}/messages"), ctx))["items"]
    (tool,) = [m for m in listed if m["role"] == "TOOL"]
    url: str = json.loads(tool["content"])["url"]
    return url


def _fetch(url: str, prefix: str, event_for: Any) -> dict[str, Any]:
    """GET the link through the data function, as the gateway would deliver it (path without the prefix)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    from functions.data import handler as data

    data._asgi.app.state.context = None
    assert url.startswith(prefix + "/api/ap/data?")
    parts = urlsplit(url)
    path = parts.path.removeprefix(urlsplit(prefix).path)
    if event_for is rest_v1_event:
        event = rest_v1_event("GET", path, query=dict(parse_qsl(parts.query)))
    else:
        event = http_v2_event("GET", path, query=urlencode(parse_qsl(parts.query)))
    response: dict[str, Any] = data.handler(event, FakeLambdaContext())
    return response


def test_data_links_through_the_rest_api_keep_the_stage_path(handler: Any) -> None:
    # Given the chat function behind the REST API's `prod` stage
    url = _saved_file_link(handler, rest_v1_event)
    # Then the link is the stage's public address, and it serves the file through the data function
    base = "https://abc123.execute-api.us-east-1.amazonaws.com/prod"
    served = _fetch(url, base, rest_v1_event)
    assert served["statusCode"] == 200 and served["body"] == "hi"


def test_data_links_through_a_function_url_use_its_domain(handler: Any) -> None:
    url = _saved_file_link(handler, http_v2_event)
    served = _fetch(url, "https://abcdefg.lambda-url.us-east-1.on.aws", http_v2_event)
    assert served["statusCode"] == 200 and served["body"] == "hi"


def test_a_configured_public_base_url_wins(handler: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a custom domain in front of the API
    monkeypatch.setenv("AGENT_PUBLIC_BASE_URL", "https://api.example.com/agent/")
    get_settings.cache_clear()
    from functions.chat import handler as module

    module._asgi.app.state.context = None
    url = _saved_file_link(handler, rest_v1_event)
    assert url.startswith("https://api.example.com/agent/api/ap/data?file=")


def test_playground_page_only_when_enabled(handler: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from functions.chat import handler as module

    ctx = FakeLambdaContext()
    # Off by default: the chat function answers `/` with the API's 404
    assert handler(http_v2_event("GET", "/", None, {}), ctx)["statusCode"] == 404
    monkeypatch.setenv("AGENT_PLAYGROUND_ENABLED", "true")
    monkeypatch.setenv("AGENT_PUBLIC_BASE_URL", "https://api.example.com/prod")
    get_settings.cache_clear()
    try:
        enabled = importlib.reload(module)
        page = enabled.handler(http_v2_event("GET", "/", None, {}), ctx)
        assert page["statusCode"] == 200 and page["headers"]["content-type"].startswith("text/html")
        assert 'data-testid="composer"' in page["body"]
        # The page calls the API through the gateway (AGENT_PUBLIC_BASE_URL), and only there
        assert '<body data-api-base="https://api.example.com/prod">' in page["body"]
        assert "connect-src 'self' https://api.example.com;" in page["headers"]["content-security-policy"]
        script = enabled.handler(http_v2_event("GET", "/playground/playground.js", None, {}), ctx)
        assert script["statusCode"] == 200 and "api/ap/query" in script["body"]
        missing = enabled.handler(http_v2_event("GET", "/playground/../config.py", None, {}), ctx)
        assert missing["statusCode"] == 404
    finally:
        monkeypatch.delenv("AGENT_PLAYGROUND_ENABLED")
        monkeypatch.delenv("AGENT_PUBLIC_BASE_URL")
        get_settings.cache_clear()
        importlib.reload(module)
