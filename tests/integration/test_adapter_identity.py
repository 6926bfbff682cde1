"""Identity behind the Lambda Web Adapter: the gateway's request context arrives in `x-amzn-request-context`.

The stream function's real app (its route group) runs over httpx's ASGI transport exactly as uvicorn serves it
behind the adapter: no `aws.event` in the scope, only the header the adapter writes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.lambda_events import http_v2_event, rest_v1_event
from tests.support.sse import events_in

ADAPTER_ENV = {
    "AWS_LAMBDA_FUNCTION_NAME": "agent-core-stream",
    "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
    "AWS_LWA_INVOKE_MODE": "response_stream",
}
ROLE_ARN = "arn:aws:sts::123456789012:assumed-role/frontend/session-1"
USER_ARN = "arn:aws:iam::123456789012:user/ops"


def _context(**settings: str) -> AppContext:
    return build_context(make_settings(**settings), table=MemoryTable(), audit=lambda line: None)


async def _client(context: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(*routes.stream_routes, context=context)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
        yield client


def rest_v1_context(identity: dict[str, Any] | None = None, authorizer: dict[str, Any] | None = None) -> str:
    """The header as the adapter writes it for an API Gateway REST (v1) proxy event."""
    context = rest_v1_event("POST", "/v1/conversations")["requestContext"]
    if identity:
        context["identity"] = {**context["identity"], **identity}
    if authorizer is not None:
        context["authorizer"] = authorizer
    return json.dumps(context)


def function_url_context(authorizer: dict[str, Any]) -> str:
    """The header as the adapter writes it for a Function URL (payload 2.0) event."""
    context = http_v2_event("POST", "/v1/conversations")["requestContext"]
    context["authorizer"] = authorizer
    return json.dumps(context)


async def _create(client: httpx.AsyncClient, header: str | None) -> httpx.Response:
    headers = {"x-amzn-request-context": header} if header is not None else {}
    return await client.post("/v1/conversations", json={"metadata": {"k": "v"}}, headers=headers)


async def _owner(context: AppContext, conversation_id: str, user: str) -> bool:
    return await context.deps.chats.get_chat(conversation_id, user) is not None


@pytest.mark.parametrize(
    ("header", "user"),
    [
        (rest_v1_context({"userArn": USER_ARN, "caller": "AIDAEXAMPLE"}), USER_ARN),
        (rest_v1_context({"caller": "AROAEXAMPLE:session-1"}), "AROAEXAMPLE:session-1"),
        (function_url_context({"iam": {"userArn": ROLE_ARN, "callerId": "AROAEXAMPLE:s"}}), ROLE_ARN),
        (function_url_context({"iam": {"callerId": "AROAEXAMPLE:s"}}), "AROAEXAMPLE:s"),
    ],
    ids=["rest-v1-userArn", "rest-v1-caller", "function-url-iam-userArn", "function-url-iam-callerId"],
)
async def test_iam_identity_is_read_from_the_adapter_header(header: str, user: str) -> None:
    # Given the stream app behind the adapter in IAM mode
    context = _context(AGENT_AUTH_MODE="iam", **ADAPTER_ENV)
    async for client in _client(context):
        # When a request arrives with the request context the adapter wrote
        created = await _create(client, header)
        # Then it is served as that principal and the conversation is theirs
        assert created.status_code == 200, created.text
        assert await _owner(context, created.json()["id"], user)
        # And another principal cannot read it
        other = rest_v1_context({"userArn": "arn:aws:iam::123456789012:user/someone-else"})
        foreign = await client.get(
            f"/v1/conversations/{created.json()['id']}", headers={"x-amzn-request-context": other}
        )
        assert foreign.status_code == 404


async def test_iam_without_a_principal_in_the_header_is_401() -> None:
    context = _context(AGENT_AUTH_MODE="iam", **ADAPTER_ENV)
    async for client in _client(context):
        for header in (None, rest_v1_context(), "not json", json.dumps(["a"])):
            refused = await _create(client, header)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    "header",
    [
        rest_v1_context(authorizer={"claims": {"sub": "cognito-user-1", "email": "a@example.com"}}),
        function_url_context({"jwt": {"claims": {"sub": "cognito-user-1"}, "scopes": None}}),
    ],
    ids=["rest-v1-cognito-authorizer", "payload-2.0-jwt-authorizer"],
)
async def test_jwt_claims_the_gateway_verified_are_read_from_the_adapter_header(header: str) -> None:
    # Given JWT mode with no JWKS configured: only the gateway's verified claims can identify the caller
    context = _context(AGENT_AUTH_MODE="jwt", **ADAPTER_ENV)
    async for client in _client(context):
        created = await _create(client, header)
        assert created.status_code == 200, created.text
        assert await _owner(context, created.json()["id"], "cognito-user-1")


@pytest.mark.parametrize(
    "env",
    [
        {},  # a local server
        {"AWS_LAMBDA_FUNCTION_NAME": "agent-core-chat"},  # a Mangum function: identity only from aws.event
        {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"},  # the adapter's variable outside Lambda
    ],
    ids=["local", "mangum-lambda", "wrapper-outside-lambda"],
)
async def test_the_header_is_ignored_where_the_adapter_does_not_set_it(env: dict[str, str]) -> None:
    # Given a process not behind the adapter, in IAM and in JWT mode
    for mode in ("iam", "jwt"):
        context = _context(AGENT_AUTH_MODE=mode, **env)
        async for client in _client(context):
            # When a client forges the header
            forged = rest_v1_context({"userArn": USER_ARN}, authorizer={"claims": {"sub": "victim"}})
            refused = await _create(client, forged)
            # Then it is not an identity
            assert refused.status_code == 401, (mode, env, refused.text)


async def test_stream_data_links_keep_the_stage_path_from_the_adapter_header() -> None:
    # Given the stream app behind the adapter, reached through the REST API's `prod` stage
    context = _context(AGENT_AUTH_MODE="iam", **ADAPTER_ENV)
    header = json.loads(rest_v1_context({"userArn": USER_ARN}))
    header["path"] = "/prod/api/ap/query"
    async for client in _client(context):
        # When a query saves a file (the save_file quick rule)
        response = await client.post(
            "/api/ap/query",
            json={"message": "save it as notes.txt: hi"},
            headers={"x-amzn-request-context": json.dumps(header)},
        )
        assert response.status_code == 200
        (result,) = [e for e in events_in(response.text) if e["type"] == "tool.result"]
        # Then the link carries the stage's public address
        url = result["result"]["url"]
        assert url.startswith("https://abc123.execute-api.us-east-1.amazonaws.com/prod/api/ap/data?file="), url
