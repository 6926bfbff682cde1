"""DynamoDB API calls per plain turn on moto, before and after the first LLM request.

Calls are counted with botocore events on the DynamoTable's own client (the factory given to the
table registers the hooks), so the table set-up calls are not counted. A plain turn is a turn in an
existing chat (4-22 messages, no compaction), with the zero-latency FakeLlm answering without tools.
The turn that opens a chat (no chat id) is reported separately.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from agent_core.context import AppContext, build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
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
    quiet_observability,
)

TURNS_PER_CHAT = 10
# after: the turn's end, its usage record and its event log (one PutItem per batch: one for a short answer)
TARGET = {"reads_before": 2, "writes_before": 1, "writes_after": 3}


def _split(log: DdbCallLog, start: int, llm: FakeLlm, calls_before: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    first_llm = llm.calls[calls_before].at
    made = log.since(start)
    before = tuple(c.operation for c in made if c.started < first_llm)
    after = tuple(c.operation for c in made if c.started >= first_llm)
    return before, after


def _pattern(before: tuple[str, ...], after: tuple[str, ...]) -> dict[str, Any]:
    return {
        "before": list(before),
        "after": list(after),
        "reads_before": sum(op in READ_OPS for op in before),
        "writes_before": sum(op in WRITE_OPS for op in before),
        "reads_after": sum(op in READ_OPS for op in after),
        "writes_after": sum(op in WRITE_OPS for op in after),
    }


async def _count(ctx: AppContext, llm: FakeLlm, log: DdbCallLog, turns: int) -> tuple[Counter[Any], Counter[Any]]:
    user = "bench-user"
    plain: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    opening: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    chat_id = ""
    for done in range(turns):
        if done % TURNS_PER_CHAT == 0:
            start, calls_before = len(log.calls), len(llm.calls)
            chat_id = await open_chat(ctx.deps, user)
            await ctx.background.join()
            opening[_split(log, start, llm, calls_before)] += 1
            await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
            await ctx.background.join()  # its usage record too
            after_turn()
        start, calls_before = len(log.calls), len(llm.calls)
        await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
        await ctx.background.join()
        after_turn()
        plain[_split(log, start, llm, calls_before)] += 1
    if llm.summarize_calls():
        raise RuntimeError("compaction ran during the call-count benchmark")
    return plain, opening


def run(turns: int = 50) -> dict[str, Any]:
    quiet_observability()
    with moto_aws():
        log = DdbCallLog()
        settings = make_settings()
        llm = FakeLlm()
        ctx = build_context(settings, table=moto_table(settings, log.attach), llm=llm)
        plain, opening = asyncio.run(_count(ctx, llm, log, turns))
    patterns = [{**_pattern(*key), "turns": n} for key, n in plain.most_common()]
    worst = {k: max(p[k] for p in patterns) for k in TARGET}
    result: dict[str, Any] = {
        "plain_turns": turns,
        "plain_patterns": patterns,
        "opening_patterns": [{**_pattern(*key), "turns": n} for key, n in opening.most_common()],
        "worst": worst,
        "meets_target": all(worst[k] <= TARGET[k] for k in TARGET),
    }
    print(f"DynamoDB calls per turn on moto ({turns} plain turns; every distinct pattern listed)")
    print("| turn | turns | before first LLM call | after | reads / writes before | reads / writes after |")
    print("|---|---|---|---|---|---|")
    rows = [("plain", p) for p in patterns] + [("opens a chat", p) for p in result["opening_patterns"]]
    for kind, p in rows:
        print(
            f"| {kind} | {p['turns']} | {', '.join(p['before'])} | {', '.join(p['after'])} "
            f"| {p['reads_before']} / {p['writes_before']} | {p['reads_after']} / {p['writes_after']} |"
        )
    verdict = "met" if result["meets_target"] else "NOT met"
    print(
        f"plain turn worst case: {worst['reads_before']} reads + {worst['writes_before']} writes before, "
        f"{worst['writes_after']} writes after (target <= 2 + 1 before, <= 3 writes after): {verdict}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    run(args.turns)


if __name__ == "__main__":
    main()
