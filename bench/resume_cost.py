"""What resumable streams cost: DynamoDB writes per streamed event, and the first resumed event's latency.

1. Writes per event (moto, counted with botocore events on the table's own client): a plain streamed answer
   of ANSWER_DELTAS text deltas, the model bursting (zero latency) and paced (a delta every PACE_MS, about
   what a fast model streams; and every SLOW_PACE_MS), with the default flush interval
   (AGENT_RUN_LOG_FLUSH_MS) and, paced, the first version's 100 ms for comparison. Reported: the event
   log's PutItems per event, and every write of the turn.
2. First resumed event after reconnect: a run streamed over real HTTP (uvicorn on loopback, the offline
   model), then `GET /api/ap/runs/{runId}/events` with `Last-Event-ID` half-way: the time from sending the
   request to the first resumed event, on the embedded store (SQLite) and on moto. p50 / p95 over RESUMES.

    python -m bench.resume_cost [--resumes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.api.sse import stream_run
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.runtime.pending import PendingTurn
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.table import Table
from agent_core.wires.native import NativeEncoder
from bench.common import DdbCallLog, make_settings, moto_aws, moto_table, percentile, quiet_observability
from tests.support.server import serve

ANSWER_DELTAS = 200  # a plain answer of about 200 tokens, one delta each
PACE_MS = 20.0  # a delta every 20 ms: about 50 tokens/s
SLOW_PACE_MS = 50.0  # about 20 tokens/s: batches fill in 1.25 s, so the flush interval writes them
FIRST_FLUSH_MS = 100  # the first version's fixed interval
TURNS = 5
RESUMES = 100
TARGET_WRITES_PER_EVENT = 1 / 20
TARGET_P95_MS = {"embedded": 150.0, "moto": 300.0}
WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


class DeltaLlm:
    """A plain answer of ANSWER_DELTAS deltas, `pace_s` apart."""

    def __init__(self, pace_s: float) -> None:
        self.pace_s = pace_s

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        for n in range(ANSWER_DELTAS):
            if self.pace_s:
                await asyncio.sleep(self.pace_s)
            yield LlmDelta(content=f"w{n} ")
        yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=Usage(prompt_tokens=20, completion_tokens=ANSWER_DELTAS))


async def _streamed_turn(ctx: AppContext, chat_id: str | None) -> tuple[int, str]:
    """One turn through the native wire's SSE loop (the route's own path, no socket): events streamed."""
    prepared = await prepare_turn(ctx.deps, TurnRequest(user_id="bench-user", message="tell me", chat_id=chat_id))
    assert isinstance(prepared, PreparedTurn)
    pending = PendingTurn(prepared)
    response = stream_run(ctx, NativeEncoder(), pending.events(), turn=pending)
    events = 0
    async for message in response.body_iterator:
        events += 1 if getattr(message, "data", None) else 0
    assert response.detached is not None
    await response.detached.finished()
    await ctx.background.join()
    return events, prepared.chat.chat_id


async def _writes_per_event(pace_s: float, **overrides: Any) -> dict[str, Any]:
    log = DdbCallLog()
    settings = make_settings(AGENT_STORAGE="aws", **overrides)
    table = moto_table(settings, on_client=log.attach)
    ctx = build_context(settings, table=table, llm=DeltaLlm(pace_s), audit=lambda line: None)
    events = log_puts = writes = 0
    chat_id = None
    for _ in range(TURNS):
        start = len(log.calls)
        streamed, chat_id = await _streamed_turn(ctx, chat_id)
        made = log.since(start)
        events += streamed
        writes += sum(c.operation in WRITE_OPS for c in made)
        log_puts += sum(c.operation == "PutItem" for c in made)
    return {
        "flush_ms": settings.run_log_flush_ms,
        "events": events,
        "log_writes": log_puts,
        "all_writes": writes,
        "log_writes_per_event": round(log_puts / events, 4),
        "all_writes_per_event": round(writes / events, 4),
    }


def _first_resumed_ms(client: httpx.Client, run_id: str, after: int) -> float:
    started = time.perf_counter()
    with client.stream("GET", f"/api/ap/runs/{run_id}/events", headers={"Last-Event-ID": str(after)}) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("the resumed stream had no event")


def _resume_latency(table: Table | None, settings_overrides: dict[str, Any], resumes: int) -> dict[str, Any]:
    settings = make_settings(**settings_overrides)
    ctx = build_context(settings, table=table, audit=lambda line: None)
    samples: list[float] = []
    with (
        serve(build_app(*routes.local, context=ctx)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "bench-user"}, timeout=30) as client,
    ):
        for n in range(resumes):
            body = {"message": " ".join(f"word{i}" for i in range(40)) + f" {n}"}
            with client.stream("POST", "/api/ap/query", json=body) as response:
                events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
            samples.append(_first_resumed_ms(client, str(events[0]["runId"]), len(events) // 2))
    return {
        "resumes": len(samples),
        "p50_ms": round(percentile(samples, 50), 2),
        "p95_ms": round(percentile(samples, 95), 2),
    }


def run(resumes: int = RESUMES) -> dict[str, Any]:
    quiet_observability()
    out: dict[str, Any] = {}
    with moto_aws():
        out["writes_burst"] = asyncio.run(_writes_per_event(0.0))
        out["writes_paced"] = asyncio.run(_writes_per_event(PACE_MS / 1000))
        out["writes_paced_slow"] = asyncio.run(_writes_per_event(SLOW_PACE_MS / 1000))
        first = {"AGENT_RUN_LOG_FLUSH_MS": FIRST_FLUSH_MS}
        out["writes_paced_first_policy"] = asyncio.run(_writes_per_event(PACE_MS / 1000, **first))
        settings = make_settings(AGENT_STORAGE="aws")
        out["resume_moto"] = _resume_latency(moto_table(settings), {"AGENT_STORAGE": "aws"}, resumes)
    with tempfile.TemporaryDirectory() as home:
        embedded = {"AGENT_STORAGE": "embedded", "AGENT_DATA_DIR": str(Path(home))}
        out["resume_embedded"] = _resume_latency(None, embedded, resumes)
    out["meets_target"] = {
        "writes_per_event_burst": out["writes_burst"]["log_writes_per_event"] <= TARGET_WRITES_PER_EVENT,
        "writes_per_event_paced": out["writes_paced"]["log_writes_per_event"] <= TARGET_WRITES_PER_EVENT,
        "first_event_p95_embedded": out["resume_embedded"]["p95_ms"] <= TARGET_P95_MS["embedded"],
        "first_event_p95_moto": out["resume_moto"]["p95_ms"] <= TARGET_P95_MS["moto"],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resumes", type=int, default=RESUMES)
    args = parser.parse_args()
    print(json.dumps(run(args.resumes), indent=2))


if __name__ == "__main__":
    main()
