"""Pass-through latency of POST /api/ap/query: the stub writing a delta -> the SSE client reading its event.

Real HTTP on loopback both ways: the openai SDK reads the stub's stream, uvicorn serves the app, httpx reads
the SSE. Lockstep (delta n+1 is written only after the client read delta n), so each figure is one delta's
trip through the whole pipe, not queueing. All three run in one process (GIL shared): a pessimistic setup.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.memory_table import MemoryTable
from bench.common import make_settings, percentile, quiet_observability
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import sse_events

DELTAS = 1000


def run(deltas: int = DELTAS) -> dict[str, Any]:
    quiet_observability()
    pieces = [f"t{i} " for i in range(deltas)]
    sent = [0.0] * deltas
    received = [0.0] * deltas
    got = [threading.Event() for _ in pieces]

    def before_chunk(seq: int) -> None:
        if 1 <= seq < deltas:
            got[seq - 1].wait(timeout=10)
            sent[seq] = time.perf_counter()

    with OpenAiStub() as stub:
        script = StubScript.text(*pieces)
        script.before_chunk = before_chunk
        stub.enqueue(script)
        settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="sk-b")
        context = build_context(settings, table=MemoryTable(), llm=OpenAiLlmClient(settings), audit=lambda _: None)
        with serve(build_app(*routes.local, context=context)) as base, httpx.Client(base_url=base, timeout=60) as c:
            n = 0
            events = 0
            started = time.perf_counter()
            with c.stream("POST", "/api/ap/query", json={"message": "stream a long answer"}) as response:
                for event in sse_events(response):
                    events += 1
                    if event["type"] == "content.delta":
                        received[n] = time.perf_counter()
                        got[n].set()
                        n += 1
            elapsed = time.perf_counter() - started
    latencies = [(received[i] - sent[i]) * 1000 for i in range(1, deltas)]
    result = {
        "deltas": n,
        "p50_ms": round(percentile(latencies, 50), 3),
        "p99_ms": round(percentile(latencies, 99), 3),
        "events_per_s": round(events / elapsed),
        "target_p50_ms": 2.0,
    }
    result["meets_target"] = result["p50_ms"] < 2.0
    print(result)
    return result


if __name__ == "__main__":
    run()
