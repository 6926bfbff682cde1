"""Approval round trip on the DynamoDB store (moto): tool.approval -> POST /api/ap/submit {approve} -> the tool starts.

A run whose `time` call needs approval (AGENT_TOOL_APPROVAL) streams `tool.approval`; the client approves at
once; the figure is from the submit's start to the tool's `run` starting in the server (same process, one
clock). The run polls its WAIT item with strongly consistent reads (first after ~50 ms, then every ~150 ms),
so the figure is dominated by where in a poll interval the answer lands. Also: the submit's own HTTP time.
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
TARGET_P95_MS = 300


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    trips: list[float] = []
    submits: list[float] = []
    starts: list[float] = []
    with moto_aws():
        settings = make_settings(AGENT_STORAGE="aws", AGENT_TOOL_APPROVAL='{"time": "always"}')
        context = build_context(settings, table=moto_table(settings), audit=lambda _: None)
        tool: Any = context.deps.tools.registry.get("time")
        original = tool.run

        async def stamped(args: Any, ctx: Any) -> Any:
            starts.append(time.perf_counter())
            return await original(args, ctx)

        tool.run = stamped  # the tool's start, stamped in the server's process
        with serve(build_app(*routes.local, context=context)) as base, httpx.Client(base_url=base, timeout=30) as c:
            for i in range(rounds):
                message = f"what time is it in Tokyo? ({i})"
                with c.stream("POST", "/api/ap/query", json={"message": message}) as response:
                    for event in sse_events(response):
                        if event["type"] == "tool.approval":
                            body = {"runId": event["runId"], "toolId": event["toolId"], "approve": True}
                            submitted_at = time.perf_counter()
                            assert c.post("/api/ap/submit", json=body).json()["accepted"]
                            submits.append((time.perf_counter() - submitted_at) * 1000)
                            started = len(starts)
                        elif event["type"] == "tool.result":
                            assert event["status"] == "ok" and len(starts) == started + 1
                            trips.append((starts[-1] - submitted_at) * 1000)
    result = {
        "rounds": len(trips),
        "p50_ms": round(percentile(trips, 50), 1),
        "p95_ms": round(percentile(trips, 95), 1),
        "max_ms": round(max(trips), 1),
        "submit_http_p50_ms": round(percentile(submits, 50), 1),
        "submit_http_p95_ms": round(percentile(submits, 95), 1),
        "target_p95_ms": TARGET_P95_MS,
    }
    result["meets_target"] = result["p95_ms"] < TARGET_P95_MS
    print(result)
    return result


if __name__ == "__main__":
    run()
