"""The app the OpenAI-compatible API tests drive: uvicorn on loopback, moto's DynamoDB, the stub as its LLM.

What it sends on /v1 is validated against the openai SDK's types as it is sent (`tests/support/openai_wire.py`).

Its fixtures are registered for every test by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
import openai
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.dynamodb import DynamoTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub
from tests.support.openai_wire import WireCheck
from tests.support.server import serve
from tests.support.wait import NeverHappened, poll_until


@pytest.fixture(name="context")
def context_fixture(openai_stub: OpenAiStub, moto_table: DynamoTable) -> AppContext:
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=openai_stub.base_url,
        OPENAI_API_KEY="sk-t",
        AGENT_LLM_MAX_RETRIES="0",
    )
    return build_context(settings, table=moto_table, llm=OpenAiLlmClient(settings), audit=lambda line: None)


class _TestApp:
    """The running test's ASGI app behind the worker's one uvicorn server; counts the requests in flight."""

    def __init__(self) -> None:
        self.app: Any = None
        self.in_flight = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.app is None:
            raise RuntimeError("no test is serving an app")
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


@pytest.fixture(scope="session")
def responses_server() -> Iterator[tuple[str, _TestApp]]:
    """One uvicorn server for the session (starting and stopping one per test took ~0.25 s)."""
    current = _TestApp()
    with serve(current) as base:
        yield base, current


@pytest.fixture(name="base_url")
def base_url_fixture(context: AppContext, responses_server: tuple[str, _TestApp]) -> Iterator[str]:
    """The test's own app (its own context, table and stub), served until its requests have ended; everything it
    sends on /v1 is checked against the openai SDK's types."""
    base, current = responses_server
    checked = WireCheck(build_app(*routes.local, context=context))
    current.app = checked
    try:
        yield f"{base}/v1"
    finally:
        # A bounded drain, as a server's shutdown waits for its responses (and then goes on, as it does)
        with contextlib.suppress(NeverHappened):
            poll_until(lambda: not current.in_flight, "the test's requests ended", bound_s=10)
        current.app = None
    assert checked.errors == [], "\n\n".join(checked.errors)


@pytest.fixture(name="client")
def client_fixture(base_url: str) -> openai.OpenAI:
    # With AGENT_AUTH_MODE=none the SDK's Bearer key names the user.
    return openai.OpenAI(base_url=base_url, api_key="user-a", max_retries=0, timeout=30)


@pytest.fixture(name="other")
def other_fixture(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="user-b", max_retries=0, timeout=30)


# The usage ledger's items (docs/operations.md): every run, stored or stateless, is counted under its user.
USAGE_ITEMS = ("USAGE#", "USAGEMARK#", "BUDGET#", "LIMITS")


def table_items(context: AppContext) -> int:
    """Conversation items in the moto table, the usage ledger's aside (tests only: no request path scans)."""
    scan = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=context.settings.table_name)
    return sum(not item["sk"]["S"].startswith(USAGE_ITEMS) for item in scan["Items"])


def chat_messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, content) of the messages the stub LLM received."""
    return [(m["role"], str(m.get("content") or "")) for m in request["messages"]]


def wait_status(client: openai.OpenAI, response_id: str, wanted: set[str]) -> Any:
    """Poll as a client would (bounded): the response once its status is one of `wanted`."""

    def settled() -> Any:
        response = client.responses.retrieve(response_id)
        return response if response.status in wanted else None

    return poll_until(settled, f"response {response_id} reached {sorted(wanted)}", bound_s=15, interval_s=0.02)
