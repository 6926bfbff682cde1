"""The Responses encoder against the native SSE encoder, on the same run.

An in-process fake LLM streams DELTAS content deltas with no latency; the real turn pipeline runs on the
in-memory table. Each run's envelopes are encoded as they arrive, by one encoder per run:
- events_per_s: wire events (SSE messages) per second of the whole run (the run's own cost included);
- encode_us p50/p99: time to turn one native envelope into its wire bytes (the latency an encoder adds
  to each event before it can be written); `added_us_*` is the Responses encoder's extra over native.
The Responses figures include feeding its aggregator (which blocking responses and storage read).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from agent_core.api.sse import sse_message
from agent_core.context import build_context
from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.memory_table import MemoryTable
from agent_core.wires.responses.aggregate import response_object
from agent_core.wires.responses.encoder import ResponsesEncoder
from agent_core.wires.responses.request import ResponseCreate
from bench.common import make_settings, percentile, quiet_observability

DELTAS = 2000
ROUNDS = 3
Encode = Callable[[Envelope], list[bytes]]


@dataclass
class DeltaLlm:
    """Streams `deltas` short content deltas, a stop and a usage delta; no latency."""

    deltas: int

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        for n in range(self.deltas):
            yield LlmDelta(content=f"t{n} ")
        yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=Usage(prompt_tokens=40, completion_tokens=self.deltas))


def native() -> Encode:
    return lambda envelope: [sse_message(envelope.wire()).encode()]


def responses() -> tuple[Encode, ResponsesEncoder]:
    body = ResponseCreate(model="main-agent", input="bench")
    skeleton = response_object(
        body, response_id="resp_bench", created_at=int(time.time()), model="main-agent", status="in_progress",
        conversation_id=None,
    )  # fmt: skip
    encoder = ResponsesEncoder(skeleton, server_label="main-agent")
    opening = [*encoder.created(), *encoder.in_progress()]  # sent before the run's first event

    def encode(envelope: Envelope) -> list[bytes]:
        events = encoder.encode(envelope)
        if opening:
            events, opening[:] = [*opening, *events], []
        return [sse_message(e, event=e["type"]).encode() for e in events]

    return encode, encoder


async def _run(encode: Encode, deltas: int) -> dict[str, Any]:
    context = build_context(make_settings(), table=MemoryTable(), llm=DeltaLlm(deltas), audit=lambda _: None)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id="bench", message="stream a long answer"))
    assert isinstance(prepared, PreparedTurn)
    costs: list[float] = []
    events = 0
    started = time.perf_counter()
    async for envelope in TurnRunner(prepared).events():
        before = time.perf_counter()
        chunks = encode(envelope)
        costs.append(time.perf_counter() - before)
        events += len(chunks)
    elapsed = time.perf_counter() - started
    return {"events": events, "elapsed_s": elapsed, "costs": costs}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [c * 1e6 for r in runs for c in r["costs"]]
    events = sum(r["events"] for r in runs)
    return {
        "wire_events_per_run": runs[0]["events"],
        "events_per_s": round(events / sum(r["elapsed_s"] for r in runs)),
        "encoder_events_per_s": round(events / (sum(costs) / 1e6)),
        "encode_us_p50": round(percentile(costs, 50), 2),
        "encode_us_p99": round(percentile(costs, 99), 2),
    }


async def _measure(deltas: int, rounds: int) -> dict[str, Any]:
    await _run(native(), deltas)  # warm-up: imports, first-call caches
    native_runs: list[dict[str, Any]] = []
    responses_runs: list[dict[str, Any]] = []
    snapshot_ms: list[float] = []
    for _ in range(rounds):  # interleaved, so drift affects both alike
        native_runs.append(await _run(native(), deltas))
        encode, encoder = responses()
        responses_runs.append(await _run(encode, deltas))
        before = time.perf_counter()
        snapshot = encoder.aggregator.snapshot()
        snapshot_ms.append((time.perf_counter() - before) * 1000)
        assert snapshot["status"] == "completed" and len(snapshot["output"]) == 1
    result: dict[str, Any] = {"deltas": deltas, "rounds": rounds}
    result["native"] = _summary(native_runs)
    result["responses"] = _summary(responses_runs)
    result["responses"]["aggregate_snapshot_ms"] = round(max(snapshot_ms), 3)
    for p in ("p50", "p99"):
        key = f"encode_us_{p}"
        result[f"added_us_{p}"] = round(result["responses"][key] - result["native"][key], 2)
    return result


def run(deltas: int = DELTAS, rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    result = asyncio.run(_measure(deltas, rounds))
    print(result)
    return result


if __name__ == "__main__":
    run()
