"""A turn over budget or over the rate limit, on every streaming wire, as that wire's usual client reads it.

- the openai SDK wires (`/v1/responses`, `/v1/chat/completions`, streamed or not): `429` with `Retry-After`,
  which the SDK itself honours: it does not retry a `budget_exceeded` (Retry-After past its 120 s ceiling) and
  retries a `rate_limited` after the Retry-After it was given (2 retries by default);
- the native stream (`/api/ap/query`, `/api/chat/stream`), AG-UI and the Vercel AI UI stream: a 200 stream
  whose terminal event is the error (native `run.error` with `code`, `retryAfter`, `limit`, `remaining`;
  AG-UI `RUN_ERROR` with the code and the rest in `metadata`; the UI stream's `error` part, read by the AI SDK's
  own reader).

Nothing of a refused turn is stored: no chat, no message, no run. The clock is set per request (X-Agent-Now,
the dev stage's override) so Retry-After is known: 10:00:00 UTC is 50,400 s before midnight.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from ag_ui.core import Event as AgUiEvent
from ag_ui.core import EventType
from pydantic import TypeAdapter

from agent_core.context import AppContext, build_context
from agent_core.domain.models import Usage
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.items import budget_key
from agent_core.store.table import Update
from agent_core.usage.budget import minute_attribute
from agent_core.usage.ledger import UsageRecord
from agent_core.wires.client_turn import client_chat_id
from tests.integration.test_ui_stream import _chat as ui_chat
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.sse import data_in, events_in

DAY = "2026-11-26"
NOW = f"{DAY}T10:00:00Z"
TO_MIDNIGHT = 14 * 3600
SPENT = "spent"  # a user whose token budget (10 a day) is spent
BUSY = "busy"  # a user who has made their one turn of the minute
AG_UI_EVENTS: TypeAdapter[Any] = TypeAdapter(AgUiEvent)
# Earlier messages in the request: a turn that went on would write them into a new chat before its own
CONVERSATION: Any = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "hello again"},
]


@pytest.fixture(name="context")
def context_fixture(openai_stub: OpenAiStub, moto_table: DynamoTable) -> AppContext:
    """The OpenAI-compatible tests' app (tests/support/responses_app.py) with a daily token budget of 10."""
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=openai_stub.base_url,
        OPENAI_API_KEY="sk-t",
        AGENT_LLM_MAX_RETRIES="0",
        AGENT_USAGE_DAILY_TOKEN_BUDGET="10",
        AGENT_DEFAULT_TIMEZONE="UTC",
        AGENT_STAGE="dev",
        AGENT_ALLOW_CLOCK_OVERRIDE="true",
    )
    return build_context(settings, table=moto_table, llm=OpenAiLlmClient(settings), audit=lambda line: None)


@pytest.fixture
async def limited(context: AppContext, moto_table: DynamoTable) -> AppContext:
    """`spent` has spent 20 tokens today; `busy` (no token budget of their own) has used their minute."""
    meter = context.deps.usage
    assert meter is not None
    for day in {DAY, datetime.now(UTC).date().isoformat()}:  # the day X-Agent-Now sets, and the real one
        spend = UsageRecord(SPENT, day, "gpt-4.1-mini", f"run:before-{day}", Usage(prompt_tokens=20), runs=1)
        await meter.ledger.record(spend)
    await meter.limits.put(BUSY, {"dailyTokens": 0, "requestsPerMinute": 1})
    minute = minute_attribute(int(datetime.fromisoformat(NOW).timestamp()))
    await moto_table.update(budget_key(BUSY, DAY), Update(add={minute: 1}))
    return context


@pytest.fixture
def requests_seen(base_url: str, responses_server: tuple[str, Any]) -> Iterator[list[str]]:
    """The paths of the requests that reach the app (the SDK's retries included)."""
    _, current = responses_server
    seen: list[str] = []
    app = current.app

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["path"])
        await app(scope, receive, send)

    current.app = counting
    yield seen


def _headers(user: str, at: str = NOW) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}", "X-Agent-Now": at}


async def _nothing_stored(context: AppContext, user: str) -> None:
    """No chat (so no message and no run) for the refused user."""
    assert (await context.deps.chats.list_chats(user, 10, None)).items == []


def _sdk(base_url: str, user: str, at: str = NOW) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=user, default_headers={"X-Agent-Now": at})


# ----- the openai SDK wires: 429 + Retry-After, as the SDK understands it -----


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_over_budget_is_a_429_the_sdk_does_not_retry(
    limited: AppContext, base_url: str, requests_seen: list[str], stream: bool
) -> None:
    with pytest.raises(openai.RateLimitError) as refused:
        _sdk(base_url, SPENT).responses.create(model="main-agent", input=CONVERSATION, stream=stream)
    error = refused.value
    assert error.status_code == 429 and error.code == "budget_exceeded"
    assert error.response.headers["Retry-After"] == str(TO_MIDNIGHT)
    assert isinstance(error.body, dict) and error.response.json()["data"]["remaining"] == {"tokens": 0}
    # The SDK honours Retry-After: 14 h is past its 120 s ceiling, so it does not retry (max_retries is 2)
    assert requests_seen == ["/v1/responses"]
    await _nothing_stored(limited, SPENT)


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_over_budget_is_a_429(
    limited: AppContext, base_url: str, requests_seen: list[str], stream: bool
) -> None:
    with pytest.raises(openai.RateLimitError) as refused:
        _sdk(base_url, SPENT).chat.completions.create(model="main-agent", messages=CONVERSATION, stream=stream)
    assert refused.value.code == "budget_exceeded" and refused.value.response.headers["Retry-After"] == str(TO_MIDNIGHT)
    assert requests_seen == ["/v1/chat/completions"]
    await _nothing_stored(limited, SPENT)


async def test_the_sdk_retries_a_rate_limited_turn_after_its_retry_after(
    limited: AppContext, base_url: str, requests_seen: list[str]
) -> None:
    # At 10:00:59 the minute ends in 1 s: the SDK waits that long and retries, twice (its default); every
    # try is at the same (overridden) minute, so each is refused again
    with pytest.raises(openai.RateLimitError) as refused:
        _sdk(base_url, BUSY, f"{DAY}T10:00:59Z").responses.create(model="main-agent", input="hello")
    assert refused.value.code == "rate_limited" and refused.value.response.headers["Retry-After"] == "1"
    assert requests_seen == ["/v1/responses"] * 3
    await _nothing_stored(limited, BUSY)


# ----- the native stream, AG-UI and the UI stream: a terminal error event -----


@pytest.mark.parametrize(
    ("path", "body", "retry_after"),
    [
        ("/api/ap/query", {"message": "hello", "requestId": "r-1"}, TO_MIDNIGHT),
        # the stateless chain endpoint runs on the wall clock (no X-Agent-Now): Retry-After to the real midnight
        ("/api/chat/stream", {"messages": [{"role": "user", "content": "hello"}]}, None),
    ],
)
async def test_the_native_stream_ends_with_run_error(
    limited: AppContext, base_url: str, path: str, body: dict[str, Any], retry_after: int | None
) -> None:
    async with httpx.AsyncClient(base_url=base_url.removesuffix("/v1"), timeout=30) as client:
        response = await client.post(path, json=body, headers=_headers(SPENT))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    [event] = events_in(response.text)
    assert event["type"] == "run.error" and event["seq"] == 1 and event["runId"] == ""  # no run was started
    assert (event["code"], event["limit"]) == ("budget_exceeded", "daily_budget")
    assert response.headers["Retry-After"] == str(event["retryAfter"])
    assert event["retryAfter"] == retry_after if retry_after else 0 < event["retryAfter"] <= 86_400
    assert event["remaining"] == {"tokens": 0}
    assert event["requestId"] == body.get("requestId", "")
    await _nothing_stored(limited, SPENT)


async def test_a_rate_limited_native_stream_says_when_to_retry(limited: AppContext, base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url.removesuffix("/v1"), timeout=30) as client:
        response = await client.post("/api/ap/query", json={"message": "hi"}, headers=_headers(BUSY))
    [event] = events_in(response.text)
    assert (event["code"], event["retryAfter"], event["remaining"]) == ("rate_limited", 60, {"requests": 0})


async def test_ag_ui_ends_with_run_error(limited: AppContext, base_url: str) -> None:
    body = {
        "threadId": "t-1",
        "runId": "run-1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    async with httpx.AsyncClient(base_url=base_url.removesuffix("/v1"), timeout=30) as client:
        response = await client.post("/api/ag-ui", json=body, headers=_headers(SPENT))
    assert response.status_code == 200 and response.headers["Retry-After"] == str(TO_MIDNIGHT)
    raw = data_in(response.text)
    [started, failed] = [AG_UI_EVENTS.validate_json(r) for r in raw]  # valid AG-UI events, RUN_STARTED first
    assert (started.type, started.thread_id, started.run_id) == (EventType.RUN_STARTED, "t-1", "run-1")
    assert (failed.type, failed.code) == (EventType.RUN_ERROR, "budget_exceeded")
    assert failed.metadata == {"retryAfter": TO_MIDNIGHT, "limit": "daily_budget", "remaining": {"tokens": 0}}
    assert await limited.deps.chats.get_chat(client_chat_id(SPENT, "t-1"), SPENT) is None
    await _nothing_stored(limited, SPENT)


async def test_ag_ui_gives_an_ended_run_again_to_a_user_now_over_budget(
    limited: AppContext, base_url: str, openai_stub: OpenAiStub
) -> None:
    # Given a user's AG-UI run that ended, then their budget spent
    openai_stub.enqueue(StubScript.text("Hello there."))
    message = {"id": "m1", "role": "user", "content": "hello"}
    body = {"threadId": "t-2", "runId": "run-1", "state": {}, "messages": [message], "tools": [], "context": []}
    async with httpx.AsyncClient(base_url=base_url.removesuffix("/v1"), timeout=30) as client:
        ran = await client.post("/api/ag-ui", json=body, headers=_headers("later"))
        meter = limited.deps.usage
        assert ran.status_code == 200 and meter is not None
        for day in {DAY, datetime.now(UTC).date().isoformat()}:
            spend = UsageRecord("later", day, "gpt-4.1-mini", f"run:after-{day}", Usage(prompt_tokens=20), runs=1)
            await meter.ledger.record(spend)
        # When they post the same RunAgentInput again, and another run
        again = await client.post("/api/ag-ui", json=body, headers=_headers("later"))
        other = await client.post("/api/ag-ui", json={**body, "runId": "run-2"}, headers=_headers("later"))
    # Then the ended run's events come again (no refusal: nothing runs), while the new run is refused
    assert again.status_code == 200 and data_in(again.text) == data_in(ran.text)
    assert AG_UI_EVENTS.validate_json(data_in(again.text)[-1]).type == EventType.RUN_FINISHED
    refused = [AG_UI_EVENTS.validate_json(r) for r in data_in(other.text)]
    assert (refused[-1].type, refused[-1].code) == (EventType.RUN_ERROR, "budget_exceeded")
    assert len(openai_stub.requests) == 1


async def test_the_ui_stream_ends_with_an_error_part_the_ai_sdk_reads(
    limited: AppContext,
    base_url: str,
    ai_modules: Path,
) -> None:
    # Read by the AI SDK's own transport and reader (useChat's): it parses and schema-checks every chunk
    api = base_url.removesuffix("/v1") + "/api/ui-stream"
    result = ui_chat(ai_modules, base_url, "chat-1", "hello", user=SPENT, headers={"X-Agent-Now": NOW})
    assert [c["type"] for c in result["chunks"]] == ["start", "error"]
    text = result["chunks"][-1]["errorText"]
    assert result["error"] == text  # what useChat's reader throws: its `error`
    assert text.startswith("[budget_exceeded] ") and f"retry after {TO_MIDNIGHT} s" in text
    assert json.dumps({"tokens": 0}) in text
    assert await limited.deps.chats.get_chat(client_chat_id(SPENT, "chat-1"), SPENT) is None
    await _nothing_stored(limited, SPENT)
    body = {"id": "chat-2", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(api, json=body, headers=_headers(SPENT))
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["Retry-After"] == str(TO_MIDNIGHT)
    assert data_in(response.text)[-1] == "[DONE]"
