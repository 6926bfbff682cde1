"""The run loop's own cost, in-memory: request -> first LLM request, and the whole blocking turn (plain answer).

For comparing two versions of the runtime with the same benchmark code: run it with one version's `shared/`
first on PYTHONPATH, then the other's, back to back (docs/benchmarks.md, "Runner split"). Same method as
`bench.turn_latency` (chats of 10 measured turns after 2 opening ones, so compaction never runs).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

import agent_core
from agent_core.context import build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.memory_table import MemoryTable
from bench.common import USER_MESSAGE, FakeLlm, after_turn, make_settings, open_chat, percentile, quiet_observability
from bench.turn_latency import SEED_TURNS, TURNS_PER_CHAT


async def _measure(turns: int, warmup: int) -> tuple[list[float], list[float]]:
    """Per measured turn: ms to the first LLM request, and ms for the whole turn."""
    settings, llm, user, table = make_settings(), FakeLlm(), "bench-user", MemoryTable()
    first: list[float] = []
    whole: list[float] = []
    for done in range(warmup + turns):
        if done % TURNS_PER_CHAT == 0:
            ctx = build_context(settings, table=table, llm=llm)
            chat_id = await open_chat(ctx.deps, user)
            for _ in range(SEED_TURNS - 1):
                await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
            after_turn()
        if done == warmup:
            gc.collect()
        before = len(llm.calls)
        started = time.perf_counter()
        await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
        ended = time.perf_counter()
        after_turn()
        if done >= warmup:
            first.append((llm.calls[before].at - started) * 1000)
            whole.append((ended - started) * 1000)
    await ctx.background.join()
    return first, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    quiet_observability()
    first, whole = asyncio.run(_measure(args.turns, args.warmup))
    print(f"runtime: {agent_core.__file__}")
    for name, values in (("first LLM request", first), ("whole turn", whole)):
        p50, p99 = statistics.median(values), percentile(values, 99)
        print(f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(values)} turns)")


if __name__ == "__main__":
    main()
