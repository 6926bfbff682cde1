"""What the usage budgets add to a turn: the admission's latency before the model call (the only part on the
answer's path), the ledger record's after it, and the DynamoDB calls a turn makes with budgets on.

Latency, timed alone, many times, on the in-memory table, the embedded SQLite table and moto:
`Admission.prepare` (a turn in a chat: the cached LIMITS read and the reservation's write built, no I/O), the
begin's transaction (`TurnStore.begin_turn`) with and without the reservation as one more item (what carrying
it costs the turn), `UsageMeter.admit` (a turn that writes before its begin, a new chat or a client's input: its
own conditional UpdateItem) and `Ledger.record` (one TransactWriteItems, after the answer).
Whole turns on moto: the time from `run_blocking` to the first LLM request of plain turns with budgets off and
on, interleaved turn by turn (two apps, a fresh moto table each per chat of 10 turns so moto's per-table costs
stay small), with the DynamoDB time inside that span from botocore's before/after-call events.
Calls: the `bench.ddb_calls` split (before / after the first LLM request) of plain turns on moto with a token
budget, a cost budget and a rate limit all set.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agent_core.config import Settings
from agent_core.context import build_context
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Chat, Message, Role, Run, Usage
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.memory_table import MemoryTable
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from agent_core.store.table import Table
from agent_core.store.table_store import TableStore
from agent_core.usage.ledger import UsageRecord
from agent_core.usage.meter import Admission, UsageMeter
from bench.common import (
    READ_OPS,
    USER_MESSAGE,
    WRITE_OPS,
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

BUDGETS = {
    "AGENT_USAGE_DAILY_TOKEN_BUDGET": 10**12,
    "AGENT_USAGE_DAILY_COST_BUDGET_USD": 10**6,
    "AGENT_USAGE_REQUESTS_PER_MINUTE": 10**9,
}
TARGET_P95_MS = 3.0
MOTO_BEGINS = 150  # begin pairs timed on moto, where each fresh table takes longer to make than its turns
UTC = ZoneInfo("UTC")


async def _time(meter: UsageMeter, turns: int) -> dict[str, float]:
    prepare: list[float] = []
    admit: list[float] = []
    record: list[float] = []
    now_ms = int(time.time() * 1000)
    for n in range(turns):
        run = Run(run_id=f"r{n}", chat_id="c", user_id="bench", request_id=f"q{n}", model="gpt-4.1-mini", started_at=0)
        admission = Admission(meter, "bench", now_ms)
        start = time.perf_counter()
        await admission.prepare(run.model, UTC)
        prepare.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        reservation = await meter.admit(run, now_ms, UTC)
        admit.append((time.perf_counter() - start) * 1000)
        usage = Usage(prompt_tokens=1200, completion_tokens=200)
        entry = UsageRecord("bench", reservation.day, run.model, f"run:{run.run_id}", usage, runs=1)
        start = time.perf_counter()
        await meter.ledger.record(entry)
        record.append((time.perf_counter() - start) * 1000)
        after_turn()
    return {
        "prepare_p50_ms": round(percentile(prepare, 50), 3),
        "prepare_p95_ms": round(percentile(prepare, 95), 3),
        "admit_p50_ms": round(percentile(admit, 50), 3),
        "admit_p95_ms": round(percentile(admit, 95), 3),
        "record_p50_ms": round(percentile(record, 50), 3),
        "record_p95_ms": round(percentile(record, 95), 3),
    }


async def _begins(tables: Callable[[], Table], settings: Settings, turns: int, per_table: int) -> dict[str, float]:
    """The begin's transaction without and with the reservation item, alternating turn by turn in one chat (each
    turn's lease released, untimed, before the next); a fresh table from `tables` every `per_table` pairs."""
    seen: dict[str, list[float]] = {"without": [], "with": []}
    at = int(time.time() * 1000)
    store = meter = chat = None
    for n in range(2 * turns):
        if n % (2 * per_table) == 0:
            table = tables()
            store, meter = TableStore(table), UsageMeter(table, settings)
            chat = Chat(chat_id=f"c_bench{n}", user_id="bench", title="bench", created_at=at, last_activity_at=at)
            await store.create_chat(chat)
        assert store is not None and meter is not None and chat is not None
        mode = "with" if n % 2 else "without"
        run = Run(
            run_id=f"r{n:05d}", chat_id=chat.chat_id, user_id="bench", request_id=f"q{n}", model="m", started_at=at
        )
        message = Message(
            id=sortable_id(at),
            chat_id=chat.chat_id,
            role=Role.USER,
            content=USER_MESSAGE,
            run_id=run.run_id,
            created_at=at,
        )
        reservation = None
        if mode == "with":
            reservation = (await meter.budget.plan("bench", run.model, at // 1000, UTC)).write
        start = time.perf_counter()
        await store.begin_turn(chat, run, message, 60_000, None, reservation)
        seen[mode].append((time.perf_counter() - start) * 1000)
        await store.release_lease(chat.chat_id, run.run_id)
        after_turn()
    quantiles = (("p50", 50), ("p95", 95))
    return {f"{mode}_{p}_ms": round(percentile(values, q), 3) for mode, values in seen.items() for p, q in quantiles}


def _median_begins(tables: Callable[[], Table], settings: Settings, turns: int, repeats: int) -> dict[str, float]:
    """`_begins` `repeats` times, each on fresh tables from `tables`: the median of each figure (the p95 of a
    commit moves by milliseconds between runs on a shared machine)."""
    runs = [asyncio.run(_begins(tables, settings, turns, turns)) for _ in range(repeats)]
    return {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}


def _latency(turns: int, begin_turns: int, begin_repeats: int) -> dict[str, dict[str, float]]:
    settings = make_settings(**BUDGETS)
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = SqliteDatabase(Path(tmp) / "admit.sqlite3")
        out["memory"] = asyncio.run(_time(UsageMeter(MemoryTable(), settings), turns))
        out["memory"] |= _median_begins(MemoryTable, settings, begin_turns, begin_repeats)
        out["sqlite"] = asyncio.run(_time(UsageMeter(SqliteTable(db), settings), turns))
        files = iter(range(10**6))
        opened: list[SqliteDatabase] = [db]

        def fresh_sqlite() -> Table:
            opened.append(SqliteDatabase(Path(tmp) / f"begins-{next(files)}.sqlite3"))
            return SqliteTable(opened[-1])

        out["sqlite"] |= _median_begins(fresh_sqlite, settings, begin_turns, begin_repeats)
        for each in opened:
            each.close()
    with moto_aws():
        out["moto"] = asyncio.run(_time(UsageMeter(moto_table(settings), settings), turns))
    tables = iter(range(10**6))

    def fresh_moto() -> Table:  # as in `_whole_turns`: moto's transactions cost more as its table grows
        return moto_table(make_settings(AGENT_TABLE_NAME=f"bench-begins-{next(tables)}", **BUDGETS))

    with moto_aws():
        out["moto"] |= asyncio.run(_begins(fresh_moto, settings, min(begin_turns, MOTO_BEGINS), TURNS_PER_CHAT))
    return out


TURNS_PER_CHAT = 10


async def _whole_turns(turns: int) -> dict[str, dict[str, float]]:
    """Budgets off vs on, interleaved turn by turn: ms from the turn's start to its first LLM request, and the part
    of it spent in DynamoDB calls. Every chat gets a fresh moto table (moto's Query and TransactWriteItems cost
    grows with the whole table, which DynamoDB's does not: see turn_latency's two moto rows)."""
    seen: dict[str, dict[str, list[float]]] = {mode: {"wall": [], "ddb": [], "calls": []} for mode in ("off", "on")}
    chats = -(-turns // TURNS_PER_CHAT) + 1  # the first chat's turns are warm-ups
    for chat_no in range(chats):
        apps = {}
        for mode, extra in (("off", {}), ("on", BUDGETS)):
            settings = make_settings(AGENT_TABLE_NAME=f"bench-usage-{mode}-{chat_no}", **extra)
            log, llm = DdbCallLog(), FakeLlm()
            ctx = build_context(settings, table=moto_table(settings, log.attach), llm=llm)
            chat_id = await open_chat(ctx.deps, "bench-user")  # also reads the user's LIMITS item (cached 60 s)
            await ctx.background.join()
            apps[mode] = (ctx, llm, log, chat_id)
        for _ in range(TURNS_PER_CHAT):
            for mode, (ctx, llm, log, chat_id) in apps.items():
                start_log, calls_before = len(log.calls), len(llm.calls)
                start = time.perf_counter()
                await run_blocking(ctx.deps, TurnRequest(user_id="bench-user", message=USER_MESSAGE, chat_id=chat_id))
                await ctx.background.join()
                after_turn()
                first_llm = llm.calls[calls_before].at
                before = [c for c in log.since(start_log) if c.started < first_llm]
                if chat_no:
                    seen[mode]["wall"].append((first_llm - start) * 1000)
                    seen[mode]["ddb"].append(sum((c.ended or c.started) - c.started for c in before) * 1000)
                    seen[mode]["calls"].append(float(len(before)))
    return {
        mode: {
            "p50_ms": round(percentile(values["wall"], 50), 2),
            "p95_ms": round(percentile(values["wall"], 95), 2),
            "ddb_p50_ms": round(percentile(values["ddb"], 50), 2),
            "calls_before": max(values["calls"]),
        }
        for mode, values in seen.items()
    }


async def _calls(turns: int) -> Counter[tuple[tuple[str, ...], tuple[str, ...]]]:
    log = DdbCallLog()
    settings = make_settings(**BUDGETS)
    llm = FakeLlm()
    ctx = build_context(settings, table=moto_table(settings, log.attach), llm=llm)
    chat_id = await open_chat(ctx.deps, "bench-user")
    await ctx.background.join()
    patterns: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    for _ in range(turns):
        start, calls_before = len(log.calls), len(llm.calls)
        await run_blocking(ctx.deps, TurnRequest(user_id="bench-user", message=USER_MESSAGE, chat_id=chat_id))
        await ctx.background.join()
        after_turn()
        first_llm = llm.calls[calls_before].at
        made = log.since(start)
        before = tuple(c.operation for c in made if c.started < first_llm)
        after = tuple(c.operation for c in made if c.started >= first_llm)
        patterns[(before, after)] += 1
    return patterns


def run(
    turns: int = 300, call_turns: int = 20, whole_turns: int = 150, begin_turns: int = 1000, begin_repeats: int = 3
) -> dict[str, Any]:
    quiet_observability()
    latency = _latency(turns, begin_turns, begin_repeats)
    with moto_aws():
        patterns = asyncio.run(_calls(call_turns))
    with moto_aws():
        whole = asyncio.run(_whole_turns(whole_turns))
    print(f"Usage admission and ledger record, {turns} turns each (ms)")
    print("| table | prepare p50 | prepare p95 | admit p50 | admit p95 | record p50 | record p95 |")
    print("|---|---|---|---|---|---|---|")
    for name, row in latency.items():
        print(
            f"| {name} | {row['prepare_p50_ms']} | {row['prepare_p95_ms']} | {row['admit_p50_ms']} "
            f"| {row['admit_p95_ms']} | {row['record_p50_ms']} | {row['record_p95_ms']} |"
        )
    print(
        f"\nThe begin's transaction without / with the reservation item, {begin_turns} each, alternating (ms; "
        f"in-process: the median of {begin_repeats} runs; moto: {min(begin_turns, MOTO_BEGINS)} pairs, a fresh "
        f"table every {TURNS_PER_CHAT})"
    )
    print("| table | without p50 | with p50 | without p95 | with p95 | added p50 | added p95 |")
    print("|---|---|---|---|---|---|---|")
    for name, row in latency.items():
        added50 = round(row["with_p50_ms"] - row["without_p50_ms"], 3)
        added95 = round(row["with_p95_ms"] - row["without_p95_ms"], 3)
        print(
            f"| {name} | {row['without_p50_ms']} | {row['with_p50_ms']} | {row['without_p95_ms']} "
            f"| {row['with_p95_ms']} | {added50} | {added95} |"
        )
    print(f"\nDynamoDB calls per plain turn with budgets on (moto, {call_turns} turns)")
    print("| turns | before first LLM call | after | reads / writes before | reads / writes after |")
    print("|---|---|---|---|---|")
    rows = []
    for (before, after), n in patterns.most_common():
        row = {
            "turns": n,
            "before": list(before),
            "after": list(after),
            "reads_before": sum(op in READ_OPS for op in before),
            "writes_before": sum(op in WRITE_OPS for op in before),
            "reads_after": sum(op in READ_OPS for op in after),
            "writes_after": sum(op in WRITE_OPS for op in after),
        }
        rows.append(row)
        print(
            f"| {n} | {', '.join(before)} | {', '.join(after)} | {row['reads_before']} / {row['writes_before']} "
            f"| {row['reads_after']} / {row['writes_after']} |"
        )
    print(f"\nWhole plain turns on moto, {whole_turns} each, interleaved: start -> first LLM request (ms)")
    print("| budgets | p50 | p95 | in DynamoDB calls, p50 | calls before the model |")
    print("|---|---|---|---|---|")
    for mode, row in whole.items():
        print(f"| {mode} | {row['p50_ms']} | {row['p95_ms']} | {row['ddb_p50_ms']} | {int(row['calls_before'])} |")
    added = round(whole["on"]["p95_ms"] - whole["off"]["p95_ms"], 2)
    print(f"added p95 on moto: {added} ms (p50 {round(whole['on']['p50_ms'] - whole['off']['p50_ms'], 2)} ms)")

    # A turn in a chat: the admission's preparation plus what the reservation item adds to the begin, at p95 (the
    # difference of two p95s: as noisy as the begin's own p95) and at p50.
    def check(name: str, q: str) -> float:
        row = latency[name]
        return row["prepare_p95_ms"] + max(0.0, row[f"with_{q}_ms"] - row[f"without_{q}_ms"])

    in_process = round(max(check(name, "p95") for name in ("memory", "sqlite")), 3)
    typical = round(max(check(name, "p50") for name in ("memory", "sqlite")), 3)
    verdict = "met" if in_process <= TARGET_P95_MS else "NOT met"
    print(
        f"\nbudget check on the in-process tables: prepare p95 + the item's added p95 {in_process} ms (target <= "
        f"{TARGET_P95_MS} ms): {verdict}; prepare p95 + the item's added p50: {typical} ms"
    )
    return {
        "latency": latency,
        "call_patterns": rows,
        "whole_turns_moto": whole,
        "meets_target": in_process <= TARGET_P95_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--call-turns", type=int, default=20)
    parser.add_argument("--whole-turns", type=int, default=150)
    parser.add_argument("--begin-turns", type=int, default=1000)
    parser.add_argument("--begin-repeats", type=int, default=3)
    args = parser.parse_args()
    run(args.turns, args.call_turns, args.whole_turns, args.begin_turns, args.begin_repeats)


if __name__ == "__main__":
    main()
