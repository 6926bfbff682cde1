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
from tests.support.fixtures import make_settings
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

    async def timer(wake: asyncio.Event, delay_s: float | None) -> None:
        if delay_s is not None:
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


class ScriptedTime:
    """The writer's monotonic clock and timer, driven by the test (no wall-clock time): `advance` moves the
    clock and wakes a waiting writer, which looks at its buffer again; `parked` is set each time it waits."""

    def __init__(self) -> None:
        self.now_ms = 0
        self.parked = asyncio.Event()
        self._tick = asyncio.Event()

    def monotonic(self) -> float:
        return self.now_ms / 1000

    async def timer(self, wake: asyncio.Event, delay_s: float | None) -> None:
        self.parked.set()
        waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(self._tick.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.parked.clear()
        self._tick.set()
        self._tick = asyncio.Event()


async def _scripted_stream(pace_ms: int, deltas: int) -> tuple[int, int, int]:
    """A plain answer through the writer as the app builds it (the settings' flush interval): 3 events at
    once, then `deltas` text deltas `pace_ms` apart, an end event and the terminal one. Returns (events, log
    writes, the longest any event waited in the buffer in ms)."""
    clock = ScriptedTime()
    max_age_s = make_settings().run_log_flush_ms / 1000
    table = CountingTable()
    writer = EventLogWriter(
        RunLogStore(table, ttl_s=60), RUN, "alice", max_age_s=max_age_s, monotonic=clock.monotonic, timer=clock.timer
    )
    added_ms: dict[int, int] = {}
    written_ms: dict[int, int] = {}
    puts_seen = 0

    async def send(seq: int, event: Any = None) -> None:
        nonlocal puts_seen
        added_ms[seq] = clock.now_ms
        writer.add(_envelope(seq, event))
        await clock.parked.wait()  # the writer has looked at its buffer (and written what was due)
        for put in table.puts[puts_seen:]:
            for written in range(int(put["first"]), int(put["last"]) + 1):
                written_ms[written] = clock.now_ms
        puts_seen = len(table.puts)

    seq = 0
    for _ in range(3):
        seq += 1
        await send(seq)
    for _ in range(deltas + 1):
        clock.advance(pace_ms)
        seq += 1
        await send(seq)
    clock.advance(pace_ms)
    seq += 1
    await send(seq, RunComplete(finish_reason="stop"))
    await writer.close()
    assert sorted(written_ms) == list(range(1, seq + 1)) and table.puts[-1]["end"] is True
    return seq, len(table.puts), max(written_ms[s] - added_ms[s] for s in added_ms)


async def test_a_paced_plain_answer_costs_at_most_one_log_write_per_20_events() -> None:
    # About 50 tokens/s: a delta every 20 ms. A batch per 100 ms (the first policy) wrote ~5 events per write.
    events, writes, _ = await _scripted_stream(pace_ms=20, deltas=200)
    assert events == 205 and writes / events <= 1 / 20, f"{writes} writes for {events} events"


async def test_a_slow_stream_still_reaches_the_log_within_the_flush_interval() -> None:
    # A delta every 300 ms: batches never fill, so the age bound writes them (what a resume elsewhere waits for)
    max_age_ms = make_settings().run_log_flush_ms
    events, writes, longest_ms = await _scripted_stream(pace_ms=300, deltas=20)
    assert longest_ms <= max_age_ms + 300  # the script looks every 300 ms
    assert writes <= (events * 300) // max_age_ms + 2  # one write per interval at most, and the terminal one


async def test_events_that_pile_up_during_a_write_go_in_whole_batches() -> None:
    class HeldTable(CountingTable):
        def __init__(self) -> None:
            super().__init__()
            self.entered = asyncio.Event()
            self.go = asyncio.Event()

        async def put(self, item: Item, condition: Condition | None = None) -> None:
            self.entered.set()
            await self.go.wait()
            await super().put(item, condition)

    clock = ScriptedTime()
    table = HeldTable()
    writer = EventLogWriter(RunLogStore(table, ttl_s=60), RUN, "alice", monotonic=clock.monotonic, timer=clock.timer)
    for seq in range(1, MAX_BATCH_EVENTS + 1):  # a full batch: its write starts (and is held)
        writer.add(_envelope(seq))
    await table.entered.wait()
    for seq in range(26, 56):  # 30 more while it is held: one whole batch and 5 that are not due yet
        writer.add(_envelope(seq))
    clock.parked.clear()
    table.go.set()
    await clock.parked.wait()
    assert [(p["first"], p["last"]) for p in table.puts] == [(1, 25), (26, 50)]
    writer.add(_envelope(56, RunComplete(finish_reason="stop")))  # the rest goes with the terminal event
    await writer.close()
    assert [(p["first"], p["last"]) for p in table.puts] == [(1, 25), (26, 50), (51, 56)]
