"""`Idempotency-Key` on POST /v1/responses: a retried create answers with the first attempt's Response and never
runs a second turn or opens a second conversation (the real openai SDK over loopback, moto's DynamoDB; and
concurrent attempts on the in-memory table, moto and SQLite)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.table import Item, Table
from tests.support.barrier import BarrierTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript

KEY = {"Idempotency-Key": "stainless-python-retry-3f9c2a"}


def test_a_retried_create_answers_with_the_first_response(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    openai_stub.enqueue(StubScript.text("Hello ", "world"))
    first = client.responses.create(model="main-agent", input="Say hello", extra_headers=KEY)
    retry = client.responses.create(model="main-agent", input="Say hello", extra_headers=KEY)
    assert retry.id == first.id and retry.output_text == "Hello world"
    assert retry.conversation is not None and first.conversation is not None
    assert retry.conversation.id == first.conversation.id
    assert len(openai_stub.requests) == 1  # one turn: the model was called once
    # A streamed retry replays the same Response's events
    events = list(client.responses.create(model="main-agent", input="Say hello", stream=True, extra_headers=KEY))
    assert events[-1].type == "response.completed" and events[-1].response.id == first.id
    assert len(openai_stub.requests) == 1


def test_another_key_or_no_key_runs_again(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    for _ in range(3):
        openai_stub.enqueue(StubScript.text("Hi"))
    first = client.responses.create(model="main-agent", input="hello", extra_headers=KEY)
    other = client.responses.create(model="main-agent", input="hello", extra_headers={"Idempotency-Key": "k-2"})
    plain = client.responses.create(model="main-agent", input="hello")
    assert len({first.id, other.id, plain.id}) == 3 and len(openai_stub.requests) == 3


def test_keys_are_per_user(client: openai.OpenAI, other: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("A"))
    openai_stub.enqueue(StubScript.text("B"))
    mine = client.responses.create(model="main-agent", input="hello", extra_headers=KEY)
    theirs = other.responses.create(model="main-agent", input="hello", extra_headers=KEY)
    assert mine.id != theirs.id and theirs.output_text == "B"


def test_a_failed_first_attempt_is_run_again_by_its_retry(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.error(400, "bad request upstream"))
    with pytest.raises(openai.APIStatusError):
        client.responses.create(model="main-agent", input="hello", extra_headers=KEY)
    openai_stub.enqueue(StubScript.text("Recovered"))
    retry = client.responses.create(model="main-agent", input="hello", extra_headers=KEY)
    assert retry.status == "completed" and retry.output_text == "Recovered"


def test_a_malformed_key_is_refused_before_any_work(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="main-agent", input="hello", extra_headers={"Idempotency-Key": "a b"})
    assert refused.value.code == "invalid_idempotency_key" and openai_stub.requests == []


# ----- concurrent attempts, on every table -----


def _client(ctx: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": "alice"}, timeout=60
    )


async def test_concurrent_creates_with_one_key_run_one_turn(any_table: Table) -> None:
    def claim(item: Item) -> bool:
        return str(item.get("SK", "")).startswith("IDEMPOTENCY#")

    # Both attempts have planned their response (and read nothing that could tell them apart) before either claims
    ctx = build_context(make_settings(), table=BarrierTable(any_table, claim), audit=lambda line: None)  # type: ignore[arg-type]
    body: dict[str, Any] = {"model": "main-agent", "input": "hello there"}
    async with _client(ctx) as client:
        answers = await asyncio.gather(
            *(client.post("/v1/responses", json=body, headers=KEY) for _ in range(2)),
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses in ([200, 409], [200, 200]), [a.text for a in answers]
    ids = {a.json()["id"] for a in answers if a.status_code == 200}
    assert len(ids) == 1
    chats = (await ctx.deps.chats.list_chats("alice", 10, None)).items
    assert len(chats) == 1  # one conversation, one turn
