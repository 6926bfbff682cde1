"""Request received -> first LLM request sent, for a plain turn, on the in-memory table, on the embedded SQLite
table (a fresh database file) and on moto.

"Request received" is taken just before `await run_blocking(deps, TurnRequest(...))` (the runtime call, not
HTTP): it covers validation, the chat/summary read, the lease transaction, the history read, the window and
the agent loop up to the model call. The end is the moment the FakeLlm's stream body starts. Every measured
turn is in an existing chat holding 4-22 messages; a new chat is opened (unmeasured) every 10 turns, so
compaction (after 40 uncovered messages) never triggers.

The whole turn (request received -> `run_blocking` returned: the answer and the run stored, the lease
released) and its CPU time are reported too, and the time spent inside the table's operations over the whole
turn (every `Table` call, timed by a wrapper around the table: the store's share of the turn). On moto the
time spent inside boto3 DynamoDB calls (botocore + moto, from botocore's before-call to after-call events) is
also reported, and the rest: the product's own work plus the thread hops.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core.context import build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.memory_table import MemoryTable
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from agent_core.store.table import Condition, Item, Key, QueryPage, SkRange, Table, Update, WriteOp
from bench.common import (
    USER_MESSAGE,
    DdbCallLog,
    FakeLlm,
    after_turn,
    make_settings,
    moto_aws,
    moto_table,
    open_chat,
    percentile,
    quiet_observability,
)

TURNS_PER_CHAT = 10
SEED_TURNS = 2  # unmeasured turns that open each chat: it holds 4 messages before its first measured turn
TARGET_P50_MS = {"memory": 15.0, "sqlite": 15.0, "moto": 40.0}
TABLES = ("memory", "sqlite", "moto")


@dataclass
class Sample:
    total_ms: float
    ddb_ms: float  # inside DynamoDB calls made before the first LLM request
    turn_ms: float  # the whole turn: run_blocking returned (answer stored, lease released)
    cpu_ms: float  # CPU time of the whole turn, every thread of the process (steadier than wall time on a busy machine)
    store_ms: float  # inside the table's operations, the whole turn (its queued jobs' included)
    store_first_ms: float  # inside the table's operations that ended before the first LLM request


class TimedTable:
    """A Table that adds up the wall time spent inside its operations."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.ms = 0.0
        self.calls: list[tuple[float, float]] = []  # (ended, ms) of each operation

    def _add(self, started: float) -> None:
        ended = time.perf_counter()
        self.ms += (ended - started) * 1000
        self.calls.append((ended, (ended - started) * 1000))

    def ms_between(self, start: float, end: float) -> float:
        """Time inside the operations that ended between `start` and `end` (perf_counter seconds)."""
        return sum(ms for ended, ms in self.calls if start <= ended <= end)

    async def get(self, key: Key) -> Item | None:
        started = time.perf_counter()
        try:
            return await self.table.get(key)
        finally:
            self._add(started)

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        started = time.perf_counter()
        try:
            return await self.table.batch_get(keys)
        finally:
            self._add(started)

    async def query(
        self,
        pk: str,
        sk: SkRange | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        start_key: Item | None = None,
    ) -> QueryPage:
        started = time.perf_counter()
        try:
            return await self.table.query(pk, sk, index=index, forward=forward, limit=limit, start_key=start_key)
        finally:
            self._add(started)

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        started = time.perf_counter()
        try:
            await self.table.put(item, condition)
        finally:
            self._add(started)

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        started = time.perf_counter()
        try:
            return await self.table.update(key, update, condition)
        finally:
            self._add(started)

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        started = time.perf_counter()
        try:
            await self.table.delete(key, condition)
        finally:
            self._add(started)

    async def transact(self, ops: list[WriteOp]) -> None:
        started = time.perf_counter()
        try:
            await self.table.transact(ops)
        finally:
            self._add(started)

    async def batch_delete(self, keys: list[Key]) -> None:
        started = time.perf_counter()
        try:
            await self.table.batch_delete(keys)
        finally:
            self._add(started)


async def _measure(table_for_chat: Callable[[int], Table], log: DdbCallLog, turns: int, warmup: int) -> list[Sample]:
    """`table_for_chat(n)` gives the table of the n-th chat (the same one, or a fresh one each time)."""
    settings = make_settings()
    llm = FakeLlm()
    user = "bench-user"
    samples: list[Sample] = []
    timed: TimedTable  # the current chat's table, set as each chat opens (done == 0 first)
    for done in range(warmup + turns):
        if done % TURNS_PER_CHAT == 0:
            timed = TimedTable(table_for_chat(done // TURNS_PER_CHAT))
            ctx = build_context(settings, table=timed, llm=llm)
            chat_id = await open_chat(ctx.deps, user)
            for _ in range(SEED_TURNS - 1):
                await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
            after_turn()
        if done == warmup:
            gc.collect()
        calls_before, ddb_before, store_before = len(llm.calls), len(log.calls), timed.ms
        started, cpu_started = time.perf_counter(), time.process_time()
        await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
        ended, cpu_ended = time.perf_counter(), time.process_time()
        first_llm = llm.calls[calls_before].at
        after_turn()
        if done >= warmup:
            ddb_ms = sum((c.ms for c in log.since(ddb_before) if c.started < first_llm), 0.0)
            wall_ms, cpu_ms = (ended - started) * 1000, (cpu_ended - cpu_started) * 1000
            store_first = timed.ms_between(started, first_llm)
            samples.append(
                Sample((first_llm - started) * 1000, ddb_ms, wall_ms, cpu_ms, timed.ms - store_before, store_first)
            )
        timed.calls.clear()
    await ctx.background.join()
    if llm.summarize_calls():
        raise RuntimeError("compaction ran during the latency benchmark")
    return samples


def _summary(name: str, target: float, samples: list[Sample], items: int) -> dict[str, Any]:
    totals = [s.total_ms for s in samples]
    rest = [s.total_ms - s.ddb_ms for s in samples]
    whole = [s.turn_ms for s in samples]
    p50 = percentile(totals, 50)
    return {
        "table": name,
        "turns": len(samples),
        "p50_ms": round(p50, 2),
        "p95_ms": round(percentile(totals, 95), 2),
        "p99_ms": round(percentile(totals, 99), 2),
        "mean_ms": round(sum(totals) / len(totals), 2),
        "max_ms": round(max(totals), 2),
        "ddb_p50_ms": round(percentile([s.ddb_ms for s in samples], 50), 2),
        "rest_p50_ms": round(percentile(rest, 50), 2),
        "rest_p99_ms": round(percentile(rest, 99), 2),
        "turn_p50_ms": round(percentile(whole, 50), 2),
        "turn_p95_ms": round(percentile(whole, 95), 2),
        "turn_cpu_mean_ms": round(sum(s.cpu_ms for s in samples) / len(samples), 3),
        "store_p50_ms": round(percentile([s.store_ms for s in samples], 50), 3),
        "store_first_p50_ms": round(percentile([s.store_first_ms for s in samples], 50), 3),
        "items_at_end": items,
        "target_p50_ms": target,
        "meets_target": p50 < target,
    }


def _item_count(table: DynamoTable) -> int:
    response = table.client.scan(TableName=table.table_name, Select="COUNT")
    return int(response["Count"])


ROUNDS = 5


def _sqlite_items(table: SqliteTable) -> int:
    with table.db.read() as connection:
        return int(connection.execute("SELECT COUNT(*) FROM items").fetchone()[0])


def _in_process(
    tables: tuple[str, ...], turns: int, warmup: int, directory: str
) -> tuple[dict[str, list[Sample]], dict[str, int]]:
    """Memory and SQLite in ROUNDS alternating blocks (the order flipped each round), so machine noise hits
    both alike; each keeps one table (one database file) for all its chats, as a server does."""
    memory = MemoryTable()
    sqlite = SqliteTable(SqliteDatabase(Path(directory) / "bench.sqlite3"))
    chosen: dict[str, Table] = {"memory": memory, "sqlite": sqlite}
    names = [name for name in ("memory", "sqlite") if name in tables]
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    per_round = -(-turns // ROUNDS)
    for n in range(ROUNDS):
        for name in names if n % 2 == 0 else names[::-1]:
            table = chosen[name]
            samples[name] += asyncio.run(_measure(lambda _, t=table: t, DdbCallLog(), per_round, warmup))
    items = {"memory": memory.item_count(), "sqlite": _sqlite_items(sqlite)}
    sqlite.db.close()
    return samples, items


def run(turns: int = 300, warmup: int = 20, tables: tuple[str, ...] = TABLES) -> dict[str, Any]:
    """In-memory and SQLite (interleaved, see `_in_process`); then moto with a fresh table per chat, and
    moto with one table for every chat.

    moto's TransactWriteItems deep-copies every table it writes to and its Query sorts the whole table,
    so on moto a turn costs more as the *table* grows, which real DynamoDB does not do; the fresh-table
    run keeps the table at one chat's items (the figure to compare with the target), the shared-table
    run shows the moto artefact.
    """
    quiet_observability()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as directory:
        measured, items = _in_process(tables, turns, warmup, directory)
    if "memory" in measured:
        results["memory"] = _summary("memory", TARGET_P50_MS["memory"], measured["memory"], items["memory"])
    if "sqlite" in measured:
        results["sqlite"] = _summary("sqlite (embedded)", TARGET_P50_MS["sqlite"], measured["sqlite"], items["sqlite"])
    if "moto" in tables:
        with moto_aws():
            log = DdbCallLog()
            moto_tables: list[DynamoTable] = []

            def fresh(n: int) -> Table:
                moto_tables.append(moto_table(make_settings(AGENT_TABLE_NAME=f"bench-latency-{n}"), log.attach))
                return moto_tables[-1]

            samples = asyncio.run(_measure(fresh, log, turns, warmup))
            items = _item_count(moto_tables[-1])
            results["moto"] = _summary("moto, fresh table per chat", TARGET_P50_MS["moto"], samples, items)
        with moto_aws():
            log = DdbCallLog()
            shared = moto_table(make_settings(), log.attach)
            samples = asyncio.run(_measure(lambda _: shared, log, turns, warmup))
            results["moto_shared"] = _summary("moto, one table", TARGET_P50_MS["moto"], samples, _item_count(shared))
    if "memory" in results and "sqlite" in results:
        mem, emb = results["memory"], results["sqlite"]
        results["sqlite_vs_memory"] = {
            key: round(emb[key] / mem[key], 2)
            for key in (
                "p50_ms",
                "p95_ms",
                "turn_p50_ms",
                "turn_p95_ms",
                "turn_cpu_mean_ms",
                "store_p50_ms",
                "store_first_p50_ms",
            )
        }
    print("turn latency: request received (just before run_blocking) -> first LLM request, ms")
    print(
        "| table | turns | p50 | p95 | p99 | mean | max | whole turn p50 / p95 | whole turn CPU, mean "
        "| in table calls, whole turn, p50 | in table calls before the LLM request, p50 | in DynamoDB calls p50 "
        "| outside them p50 / p99 | items in table at end | target p50 | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, r in results.items():
        if key == "sqlite_vs_memory":
            continue
        print(
            f"| {r['table']} | {r['turns']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['mean_ms']} "
            f"| {r['max_ms']} | {r['turn_p50_ms']} / {r['turn_p95_ms']} | {r['turn_cpu_mean_ms']} "
            f"| {r['store_p50_ms']} | {r['store_first_p50_ms']} | {r['ddb_p50_ms']} "
            f"| {r['rest_p50_ms']} / {r['rest_p99_ms']} | {r['items_at_end']} | < {r['target_p50_ms']} "
            f"| {'yes' if r['meets_target'] else 'NO'} |"
        )
    if "sqlite_vs_memory" in results:
        print("sqlite / memory:", results["sqlite_vs_memory"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--tables", default=",".join(TABLES), help="comma-separated, of: " + ", ".join(TABLES))
    args = parser.parse_args()
    run(args.turns, args.warmup, tuple(t for t in args.tables.split(",") if t))


if __name__ == "__main__":
    main()
