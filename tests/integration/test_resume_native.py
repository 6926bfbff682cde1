"""Resuming a native stream from the run's durable log: GET /api/ap/runs/{runId}/events.

The live stream and the resumed one are compared byte for byte (`id:` and `data:` lines; `: ping` comments
are not events). Storage is a table shared by two app instances (two Lambda environments); slow and failing
log writes are table wrappers the tests hold in their hands (no timing in any assertion).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table import Condition, Item
from tests.support.fixtures import make_settings
from tests.support.server import serve
from tests.support.sse import events_in, sse_events

USER = {"X-User-Id": "alice"}


def messages_of(body: str) -> list[str]:
    """The SSE messages of a body (comments left out), each as its exact text."""
    return [m for m in body.split("\n\n") if m and not m.startswith(":")]


class WatchedTable(MemoryTable):
    """A memory table whose log writes (LOG# items) can be held back or fail, and are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.log_puts: list[Item] = []
        self.hold: threading.Event | None = None  # log writes wait for it (the server runs on its own thread)
        self.fail_log = False

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        if str(item.get("sk", "")).startswith("LOG#"):
            if self.hold is not None:
                assert await asyncio.to_thread(self.hold.wait, 30), "the test never let the log write go"
            if self.fail_log:
                raise RuntimeError("the table refused the write")
            self.log_puts.append(item)
        await super().put(item, condition)


def _context(table: MemoryTable, **settings: Any) -> AppContext:
    return build_context(make_settings(**settings), table=table, audit=lambda line: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app", headers=USER, timeout=30)


@pytest.fixture
def table() -> WatchedTable:
    return WatchedTable()


@pytest.fixture
async def clients(table: WatchedTable) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two app instances over one table."""
    async with _client(_context(table)) as first, _client(_context(table)) as second:
        yield first, second


async def _ask(client: httpx.AsyncClient, message: str) -> tuple[str, str]:
    response = await client.post("/api/ap/query", json={"message": message})
    assert response.status_code == 200, response.text
    run_id = re.search(r'"runId":"([^"]+)"', response.text)
    assert run_id is not None
    return response.text, run_id.group(1)


async def test_every_event_carries_its_seq_as_id_and_resumes_byte_identical_on_another_instance(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    first, second = clients
    # Given a whole run streamed by one instance
    body, run_id = await _ask(first, "what time is it in Tokyo?")
    live = messages_of(body)
    seqs = [json.loads(m.split("data: ", 1)[1])["seq"] for m in live]
    assert [m.split("\n", 1)[0] for m in live] == [f"id: {s}" for s in seqs] and seqs == list(range(1, len(live) + 1))
    # When it is resumed on the other instance after each event (Last-Event-ID, or ?after=)
    for cut in range(len(live) + 1):
        by_header = await second.get(f"/api/ap/runs/{run_id}/events", headers={"Last-Event-ID": str(cut)})
        by_query = await second.get(f"/api/ap/runs/{run_id}/events", params={"after": cut})
        # Then what was received joined to the resumed stream is the live stream, byte for byte
        assert by_header.status_code == by_query.status_code == 200
        assert live[:cut] + messages_of(by_header.text) == live
        assert by_query.text == by_header.text


async def test_an_unknown_or_foreign_run_is_404_and_a_bad_last_event_id_422(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    first, _ = clients
    _, run_id = await _ask(first, "hello")
    unknown = await first.get("/api/ap/runs/nope/events")
    foreign = await first.get(f"/api/ap/runs/{run_id}/events", headers={"X-User-Id": "bob"})
    assert unknown.status_code == foreign.status_code == 404
    assert unknown.json()["error"]["code"] == foreign.json()["error"]["code"] == "run_not_found"
    bad = await first.get(f"/api/ap/runs/{run_id}/events", headers={"Last-Event-ID": "x1"})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "Last-Event-ID"


async def test_the_log_is_written_in_batches_with_the_terminal_event_at_once(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], table: WatchedTable
) -> None:
    first, _ = clients
    # A plain answer of many events (the offline model echoes the question word by word)
    body, run_id = await _ask(first, " ".join(f"w{i}" for i in range(60)))
    count = len(messages_of(body))
    assert count > 50
    batches = [json.loads(item["events"]) for item in table.log_puts if item["pk"] == f"RUN#{run_id}"]
    # Every event once, in order, at most 25 per write; only the last batch holds the terminal event
    assert [e["seq"] for batch in batches for e in batch] == list(range(1, count + 1))
    assert all(len(batch) <= 25 for batch in batches) and len(batches) <= count // 25 + 2
    assert [item["end"] for item in table.log_puts] == [False] * (len(batches) - 1) + [True]
    assert all(item["userId"] == "alice" and item["expiresAt"] > 0 for item in table.log_puts)


def test_a_slow_log_never_delays_the_live_stream(table: WatchedTable) -> None:
    # Given log writes held back until the test lets them go, and a server streaming over real HTTP
    table.hold = threading.Event()
    app = build_app(*routes.local, context=_context(table))
    with serve(app) as base, httpx.Client(base_url=base, headers=USER, timeout=30) as client:
        # When a run streams, Then its whole stream arrives, terminal event included, before any log write
        received: list[dict[str, Any]] = []
        with client.stream("POST", "/api/ap/query", json={"message": "what time is it in Tokyo?"}) as response:
            for event in sse_events(response):
                received.append(event)
                if event["type"] == "run.complete":
                    assert table.log_puts == []
                    table.hold.set()
        # And once the writes go through, the run resumes from its log
        resumed = client.get(f"/api/ap/runs/{received[0]['runId']}/events", params={"after": 3})
        assert events_in(resumed.text) == received[3:]
    assert table.log_puts


async def test_a_failing_log_breaks_nothing_and_resume_says_it_cannot(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], table: WatchedTable
) -> None:
    first, second = clients
    # Given a table that refuses every log write
    table.fail_log = True
    # When a run streams, Then the live stream is whole and the answer stored
    body, run_id = await _ask(first, "what time is it in Tokyo?")
    live = events_in(body)
    assert live[-1]["type"] == "run.complete"
    chat = await first.get("/api/ap/chat", params={"chatId": live[0]["chatId"]})
    assert chat.json()["events"][-1]["type"] == "run.complete"
    # And a resume mid-run is refused clearly (410 resume_unavailable), from the start it is the replay
    cut = await second.get(f"/api/ap/runs/{run_id}/events", params={"after": 5})
    assert cut.status_code == 410 and cut.json()["error"]["code"] == "resume_unavailable"
    whole = await second.get(f"/api/ap/runs/{run_id}/events")
    assert events_in(whole.text) == chat.json()["events"]


async def test_a_run_ended_before_its_last_batch_is_written_resumes_once_it_is(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], table: WatchedTable
) -> None:
    from agent_core.runtime.resume import open_resume

    first, _ = clients
    body, run_id = await _ask(first, " ".join(f"w{i}" for i in range(60)))
    live = events_in(body)
    # Given the run stored as ended while its last batch is still on its way (the run's end is stored before
    # its terminal event is written), and a resume far enough on that no batch it reads is written yet
    last = table.log_puts[-1]
    assert last["end"] is True and len(table.log_puts) >= 3
    await table.delete({"pk": last["pk"], "sk": last["sk"]})
    after = int(last["first"]) + 5
    assert after - 24 > int(table.log_puts[-2]["first"])
    # When it opens, Then it waits for the log (not 410) and gets the rest once the batch is written
    resumed = await open_resume(_context(table).deps, run_id, "alice", after)
    await MemoryTable.put(table, last)
    assert [event async for event in resumed] == live[after:]


async def test_an_expired_log_is_not_read(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], table: WatchedTable
) -> None:
    first, second = clients
    body, run_id = await _ask(first, "what time is it in Tokyo?")
    # Given the run's log items past their TTL (DynamoDB and moto keep such items for a while)
    for item in table.log_puts:
        await MemoryTable.put(table, {**item, "expiresAt": 1})
    # Then a resume mid-run is 410; one from the start is the run's replay; one after the end is empty
    cut = await second.get(f"/api/ap/runs/{run_id}/events", params={"after": 5})
    assert cut.status_code == 410 and cut.json()["error"]["code"] == "resume_unavailable"
    whole = await second.get(f"/api/ap/runs/{run_id}/events")
    assert [e["type"] for e in events_in(whole.text)][-1] == "run.complete"
    assert [e["type"] for e in events_in(whole.text)] != [e["type"] for e in events_in(body)]  # the snapshot
    done = await second.get(f"/api/ap/runs/{run_id}/events", params={"after": len(events_in(body))})
    assert done.status_code == 200 and messages_of(done.text) == []


async def test_a_consumer_that_leaves_a_run_driven_inline_ends_it_at_once(table: WatchedTable) -> None:
    # A run driven by its consumer (the stateless wires, blocking callers), not detached
    from agent_core.domain.models import RunStatus
    from agent_core.runtime.loop import TurnRunner
    from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn

    context = _context(table)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id="alice", message="one two three four five"))
    assert isinstance(prepared, PreparedTurn)
    events = TurnRunner(prepared).events()
    assert (await anext(events)).type == "request.query"
    # When the consumer closes it mid-run, Then the run is ended (cancelled, stored) before aclose returns
    await events.aclose()
    run = await context.deps.turns.get_run(prepared.chat.chat_id, prepared.run.run_id)
    assert run is not None and run.status == RunStatus.CANCELLED
    # And the log holds what was sent (the terminal event was not: the client that left never saw it)
    logged = [json.loads(item["events"]) for item in table.log_puts]
    assert [e["type"] for batch in logged for e in batch] == ["request.query"]
