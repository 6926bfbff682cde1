"""The run's durable event log: its items (store/run_log.py) and its writer (runtime/event_log.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_core.domain.events import ContentDelta, RunComplete, ToolEnd, ToolStart
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.event_log import EventLogWriter
from agent_core.store.memory_table import MemoryTable
from agent_core.store.run_log import MAX_BATCH_EVENTS, EventTooLarge, RunLogStore
from agent_core.store.table import Condition, Item
from tests.support.wait import apoll_until

RUN = "run-1"


class CountingTable(MemoryTable):
    def __init__(self) -> None:
        super().__init__()
        self.puts: list[Item] = []

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        self.puts.append(item)
        await super().put(item, condition)


def _envelope(seq: int, event: Any = None) -> Envelope:
    return Envelope(event or ContentDelta(content_id="m", delta=f"d{seq}"), seq, 1000 + seq, RUN, "c", "r")


def _wire(seq: int) -> dict[str, Any]:
    return _envelope(seq).wire()


async def test_reads_start_anywhere_and_stop_at_a_gap() -> None:
    log = RunLogStore(MemoryTable(), ttl_s=60)
    await log.append(RUN, "alice", [_wire(s) for s in range(1, 31)], now_s=100)  # two items: 25 + 5
    await log.append(RUN, "alice", [_wire(s) for s in range(35, 40)], now_s=100)  # 31..34 never written
    read = await log.read(RUN, "alice", 12, now_s=100)
    assert [e["seq"] for e in read.events] == list(range(13, 31)) and read.gap and read.found
    assert not (await log.read(RUN, "alice", 30, now_s=100)).events
    assert (await log.read(RUN, "alice", 30, now_s=100)).gap
    # Another owner's run reads as nothing; so does an expired log
    assert not (await log.read(RUN, "bob", 0, now_s=100)).found
    expired = await log.read(RUN, "alice", 0, now_s=160)
    assert not expired.found and not expired.events


async def test_batches_keep_under_the_item_limit_and_a_huge_event_is_refused() -> None:
    log = RunLogStore(MemoryTable(), ttl_s=60)
    big = [{**_wire(s), "delta": "x" * 150_000} for s in range(1, 5)]
    assert [len(b) for b in log.batches(big)] == [2, 2]
    assert [len(b) for b in log.batches([_wire(s) for s in range(1, 61)])] == [MAX_BATCH_EVENTS, MAX_BATCH_EVENTS, 10]
    with pytest.raises(EventTooLarge):
        log.batches([{**_wire(1), "delta": "x" * 500_000}])


async def test_the_writer_waits_for_a_batch_but_writes_waiting_and_terminal_events_at_once() -> None:
    table = CountingTable()
    waiting = asyncio.Event()  # set when the writer holds events back for its batch delay

    async def timer(wake: asyncio.Event, delay_s: float) -> None:
        waiting.set()
        await wake.wait()  # a delay that never passes: whatever is written was written at once

    writer = EventLogWriter(RunLogStore(table, ttl_s=60), RUN, "alice", timer=timer)

    async def written(count: int) -> list[int]:
        await apoll_until(lambda: _true(len(table.puts) >= count), f"{count} log writes")
        return [p["last"] for p in table.puts]

    writer.add(_envelope(1))
    writer.add(_envelope(2, ToolStart(tool_id="t", tool_name="ask_user", tool_type="frontend")))
    await waiting.wait()
    assert table.puts == []  # buffered for the batch
    writer.add(_envelope(3, ToolEnd(tool_id="t")))  # the run now waits for the browser: written at once
    assert await written(1) == [3] and table.puts[0]["first"] == 1
    for seq in range(4, 4 + MAX_BATCH_EVENTS):  # a full batch: written at once
        writer.add(_envelope(seq))
    assert await written(2) == [3, 3 + MAX_BATCH_EVENTS]
    waiting.clear()
    writer.add(_envelope(29))
    await waiting.wait()
    assert len(table.puts) == 2
    writer.add(_envelope(30, RunComplete(finish_reason="stop")))  # the terminal event: at once
    assert await written(3) == [3, 28, 30] and table.puts[-1]["end"] is True
    await writer.close()
    assert writer.writes == 3 and not writer.failed


async def _true(value: bool) -> bool:
    return value


async def test_the_writer_gives_up_on_a_lasting_failure_without_raising() -> None:
    class Refusing(MemoryTable):
        async def put(self, item: Item, condition: Condition | None = None) -> None:
            raise RuntimeError("throttled")

    writer = EventLogWriter(RunLogStore(Refusing(), ttl_s=60), RUN, "alice")
    writer.add(_envelope(1, RunComplete(finish_reason="stop")))
    await writer.close()
    assert writer.failed and writer.writes == 0
    writer.add(_envelope(2))  # nothing more is buffered
    await writer.close()
