"""Request received -> first LLM request sent, for a plain turn, on the in-memory table and on moto.

"Request received" is taken just before `await run_blocking(deps, TurnRequest(...))` (the runtime
call, not HTTP): it covers validation, the chat/summary read, the lease transaction, the history
read, the window and the agent loop up to the model call. The end is the moment the FakeLlm's
stream body starts. Every measured turn is in an existing chat with 4-22 messages; a new chat is
opened (unmeasured) every 10 turns, so compaction (after 40 uncovered messages) never triggers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

from agent_core.context import build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.memory import MemoryTable
from agent_core.store.table import Table
from bench.common import (
    USER_MESSAGE,
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
TARGET_P50_MS = {"memory": 15.0, "moto": 40.0}


async def _measure(table: Table, turns: int, warmup: int) -> list[float]:
    settings = make_settings()
    llm = FakeLlm()
    ctx = build_context(settings, table=table, llm=llm)
    user = "bench-user"
    chat_id: str | None = None
    samples: list[float] = []
    done = 0
    total = warmup + turns
    while done < total:
        if done % TURNS_PER_CHAT == 0 or chat_id is None:
            chat_id = await open_chat(ctx.deps, user)
            for _ in range(SEED_TURNS - 1):
                await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
            after_turn()
        if done == warmup:
            gc.collect()
        calls_before = len(llm.calls)
        started = time.perf_counter()
        await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
        first_llm = llm.calls[calls_before].at
        after_turn()
        if done >= warmup:
            samples.append((first_llm - started) * 1000)
        done += 1
    await ctx.queue.join()
    if llm.summarize_calls():
        raise RuntimeError("compaction ran during the latency benchmark")
    return samples


def _summary(name: str, samples: list[float]) -> dict[str, Any]:
    p50 = percentile(samples, 50)
    return {
        "table": name,
        "turns": len(samples),
        "p50_ms": round(p50, 2),
        "p99_ms": round(percentile(samples, 99), 2),
        "mean_ms": round(sum(samples) / len(samples), 2),
        "max_ms": round(max(samples), 2),
        "target_p50_ms": TARGET_P50_MS[name],
        "meets_target": p50 < TARGET_P50_MS[name],
    }


def run(turns: int = 300, warmup: int = 20) -> dict[str, Any]:
    quiet_observability()
    results: dict[str, Any] = {}
    results["memory"] = _summary("memory", asyncio.run(_measure(MemoryTable(), turns, warmup)))
    with moto_aws():
        table = moto_table(make_settings())
        results["moto"] = _summary("moto", asyncio.run(_measure(table, turns, warmup)))
    print("turn latency: request received (before run_blocking) -> first LLM request")
    print("| table | turns | p50 ms | p99 ms | mean ms | max ms | target p50 | met |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results.values():
        print(
            f"| {r['table']} | {r['turns']} | {r['p50_ms']} | {r['p99_ms']} | {r['mean_ms']} | {r['max_ms']} "
            f"| < {r['target_p50_ms']} | {'yes' if r['meets_target'] else 'NO'} |"
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    run(args.turns, args.warmup)


if __name__ == "__main__":
    main()
