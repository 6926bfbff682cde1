"""Submit round trip on the DynamoDB store (moto): POST /api/ap/submit -> the waiting run emits request.submit.

The run polls its WAIT item with strongly consistent reads (first after ~50 ms, then every ~150 ms), so the
figure is dominated by where in a poll interval the submit lands.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from bench.common import make_settings, moto_aws, moto_table, percentile, quiet_observability
from tests.support.server import serve
from tests.support.sse import sse_events

ROUNDS = 40


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    trips: list[float] = []
    with moto_aws():
        settings = make_settings(AGENT_STORAGE="aws")
        context = build_context(settings, table=moto_table(settings), audit=lambda _: None)
        with serve(build_app(*routes.local, context=context)) as base, httpx.Client(base_url=base, timeout=30) as c:
            for i in range(rounds):
                submitted_at = 0.0
                with c.stream("POST", "/api/ap/query", json={"message": f"ask me question {i}"}) as response:
                    for event in sse_events(response):
                        if event["type"] == "tool.end":
                            body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"n": i}}
                            submitted_at = time.perf_counter()
                            assert c.post("/api/ap/submit", json=body).json()["accepted"]
                        elif event["type"] == "request.submit":
                            trips.append((time.perf_counter() - submitted_at) * 1000)
    result = {
        "rounds": len(trips),
        "p50_ms": round(percentile(trips, 50), 1),
        "p95_ms": round(percentile(trips, 95), 1),
        "max_ms": round(max(trips), 1),
        "target_p95_ms": 300,
    }
    result["meets_target"] = result["p95_ms"] < 300
    print(result)
    return result


if __name__ == "__main__":
    run()
