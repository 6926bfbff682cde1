"""A waiting run's checkpoint and its continuation after a crash, on the DynamoDB store (moto), in-process.

Two figures per round, one clock:
- **checkpoint**: what a run that starts waiting on an approval spends writing its checkpoint (its event log
  flushed to the last event, then one PutItem), measured around `StepCheckpoints._write`; it delays the
  run's first poll of its WAIT item, so an answer given at once is seen that much later.
- **continuation**: a run waits on an approval, its process "dies" (its table stops answering, its task is
  dropped: none of its clean-up lands), its lease expires; then the answer comes to the living instance
  (`answer_approval`, which queues the ContinueRunJob on the in-process queue) and the figure runs from the
  answer's start to the tool starting in the continuation (reading the checkpoint, its waits and log, taking
  the lease, rebuilding the turn, the claim).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_core.api.routes.submit import answer_approval
from agent_core.domain.ids import now_ms
from agent_core.runtime.checkpoint import StepCheckpoints
from agent_core.store import items as it
from bench.common import make_settings, moto_aws, moto_table, percentile, quiet_observability
from tests.support.approvals import crash_while_waiting, decision

ROUNDS = 30


async def _round(table: Any) -> float:
    living, tool, seen = await crash_while_waiting(table, ("c1",))
    chat_id, run_id = seen[0]["chatId"], seen[0]["runId"]
    started: list[float] = []
    original = tool.run

    async def stamped(args: Any, ctx: Any) -> Any:
        started.append(time.perf_counter())
        return await original(args, ctx)

    tool.run = stamped  # type: ignore[method-assign]
    meta = await table.get(it.meta_key(chat_id))
    await table.put({**meta, "leaseExpiresAt": now_ms() - 1})  # two missed heartbeats later
    answered_at = time.perf_counter()
    assert (await answer_approval(living.deps, run_id, "c1", decision(True)))["accepted"]
    for _ in range(3000):
        if started:
            break
        await asyncio.sleep(0.001)
    assert started, "the continuation never ran the tool"
    # let the continued run end before the next round
    for _ in range(3000):
        stored = await living.deps.turns.get_run(chat_id, run_id)
        if stored is not None and stored.status.value != "running":
            break
        await asyncio.sleep(0.005)
    return (started[0] - answered_at) * 1000


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    checkpoints: list[float] = []
    trips: list[float] = []
    original_write = StepCheckpoints._write

    async def timed_write(self: StepCheckpoints, pending: Any) -> None:
        began = time.perf_counter()
        await original_write(self, pending)
        checkpoints.append((time.perf_counter() - began) * 1000)

    StepCheckpoints._write = timed_write  # type: ignore[method-assign]
    try:
        with moto_aws():
            settings = make_settings(AGENT_STORAGE="aws")
            table = moto_table(settings)

            async def main() -> None:
                for _ in range(rounds):
                    trips.append(await _round(table))

            asyncio.run(main())
    finally:
        StepCheckpoints._write = original_write  # type: ignore[method-assign]
    result = {
        "rounds": len(trips),
        "checkpoint_p50_ms": round(percentile(checkpoints, 50), 1),
        "checkpoint_p95_ms": round(percentile(checkpoints, 95), 1),
        "continuation_p50_ms": round(percentile(trips, 50), 1),
        "continuation_p95_ms": round(percentile(trips, 95), 1),
        "continuation_max_ms": round(max(trips), 1),
    }
    print(result)
    return result


if __name__ == "__main__":
    run()
