"""GET /v1/responses/{id}?stream=true&starting_after=N on any instance: the run's log encoded again.

Two app instances share one table (in memory, SQLite and moto): a streamed or background response created
on one is followed on the other with the very events, bytes and sequence numbers of the live stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.store.table import Table
from tests.support.fixtures import make_settings

USER = {"X-User-Id": "alice"}


def messages_of(body: str) -> list[str]:
    return [m for m in body.split("\n\n") if m and not m.startswith(":")]


@pytest.fixture
async def clients(any_table: Table) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    apps = [
        build_app(*routes.local, context=build_context(make_settings(), table=any_table, audit=lambda line: None))
        for _ in range(2)
    ]
    first, second = (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app", headers=USER, timeout=30)
        for app in apps
    )
    async with first, second:
        yield first, second


def _response_id(live: list[str]) -> str:
    return str(json.loads(live[0].split("data: ", 1)[1])["response"]["id"])


@pytest.mark.parametrize("background", [False, True], ids=["streamed", "background"])
async def test_a_response_resumes_on_another_instance_with_the_same_events(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], background: bool
) -> None:
    first, second = clients
    body: dict[str, Any] = {"model": "main-agent", "input": "what time is it in Tokyo?", "stream": True}
    if background:
        body["background"] = True
    created = await first.post("/v1/responses", json=body)
    live = messages_of(created.text)
    # Each event's id is its sequence_number
    assert [m.split("\n", 1)[0] for m in live] == [f"id: {n}" for n in range(len(live))]
    response_id = _response_id(live)
    for after in (-1, 0, 1, len(live) // 2, len(live) - 2, len(live) - 1):
        resumed = await second.get(f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": after})
        assert live[after + 1 :] == messages_of(resumed.text)
    # EventSource's Last-Event-ID stands for starting_after
    by_header = await second.get(
        f"/v1/responses/{response_id}", params={"stream": "true"}, headers={"Last-Event-ID": "3"}
    )
    assert live[4:] == messages_of(by_header.text)
    bad = await second.get(f"/v1/responses/{response_id}", params={"stream": "true"}, headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"


async def test_another_users_response_is_not_resumed(clients: tuple[httpx.AsyncClient, httpx.AsyncClient]) -> None:
    first, second = clients
    created = await first.post("/v1/responses", json={"model": "main-agent", "input": "hello", "stream": True})
    response_id = _response_id(messages_of(created.text))
    foreign = await second.get(f"/v1/responses/{response_id}", params={"stream": "true"}, headers={"X-User-Id": "bob"})
    assert foreign.status_code == 404
