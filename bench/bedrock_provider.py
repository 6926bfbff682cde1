"""The Bedrock adapter against the OpenAI adapter: per streamed event, and the first call's import cost.

1. Per streamed event: one answer of N text deltas from each loopback stub (the ConverseStream stub's
   event-stream framing, the OpenAI stub's SSE chunks) read through each real adapter (boto3 / the openai
   SDK) in this process, alternating the two, R rounds; wall and CPU time per delta, medians. The figure
   includes the client library's parsing, so it is what a turn pays per delta, not the mapping alone.
2. The first model call's imports in a fresh process: `build_context` with the provider, then the adapter
   module and its SDK client (boto3 `bedrock-runtime` / `openai.AsyncOpenAI`); median of 5 processes each,
   and whether `openai` was imported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent_core.llm.base import LlmClient, LlmRequest
from agent_core.llm.bedrock_client import BedrockLlmClient
from agent_core.llm.openai_client import OpenAiLlmClient
from bench.common import make_settings, quiet_observability
from tests.support.bedrock_stub import BedrockScript, BedrockStub
from tests.support.openai_stub import OpenAiStub, StubScript

ROOT = Path(__file__).resolve().parent.parent
DELTAS = 2000
ROUNDS = 5
PROCESSES = 5
TARGET_RATIO = 1.2

_FIRST_CALL = """
import sys, time
t0 = time.perf_counter()
from agent_core.config import Settings
from agent_core.context import build_context
ctx = build_context(Settings(AGENT_STORAGE="memory", AGENT_LLM_PROVIDER="{provider}", OPENAI_API_KEY="k"))
llm = ctx.deps.llm
if "{provider}" == "bedrock":
    llm.client
else:
    llm._build_client("k")
print(time.perf_counter() - t0, "openai" in sys.modules)
"""


async def _read(client: LlmClient, request: LlmRequest) -> int:
    count = 0
    async for delta in client.stream(request):
        count += bool(delta.content)
    return count


def _per_delta(client: LlmClient, request: LlmRequest, deltas: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    got = asyncio.run(_read(client, request))
    assert got == deltas, got
    return (time.perf_counter() - wall) / deltas * 1e6, (time.process_time() - cpu) / deltas * 1e6


def streamed(deltas: int = DELTAS, rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    pieces = [f"t{i} " for i in range(deltas)]
    request = LlmRequest(model="m", messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    results: dict[str, list[tuple[float, float]]] = {"bedrock": [], "openai": []}
    with BedrockStub() as bedrock, OpenAiStub() as openai_stub:
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_ENDPOINT_URL_BEDROCK_RUNTIME=bedrock.endpoint_url,
        )
        b_client = BedrockLlmClient(make_settings(AGENT_LLM_PROVIDER="bedrock"))
        o_client = OpenAiLlmClient(
            make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="k")
        )
        for _ in range(rounds + 1):  # the first round warms both up and is dropped
            bedrock.enqueue(BedrockScript.text(*pieces))
            openai_stub.enqueue(StubScript.text(*pieces))
            results["bedrock"].append(_per_delta(b_client, request, deltas))
            o_client._client = None  # a fresh SDK client per run: asyncio.run closes the loop it was bound to
            results["openai"].append(_per_delta(o_client, request, deltas))
    out: dict[str, Any] = {"deltas": deltas, "rounds": rounds}
    for name, rows in results.items():
        rows = rows[1:]
        out[name] = {
            "wall_us": statistics.median(r[0] for r in rows),
            "cpu_us": statistics.median(r[1] for r in rows),
        }
    out["ratio_wall"] = out["bedrock"]["wall_us"] / out["openai"]["wall_us"]
    out["ratio_cpu"] = out["bedrock"]["cpu_us"] / out["openai"]["cpu_us"]
    out["target"] = TARGET_RATIO
    return out


def first_call(processes: int = PROCESSES) -> dict[str, Any]:
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", POWERTOOLS_TRACE_DISABLED="1")
    times: dict[str, list[float]] = {"bedrock": [], "openai": []}
    imported: dict[str, bool] = {}
    for _ in range(processes):
        for provider in times:
            code = _FIRST_CALL.replace("{provider}", provider)
            line = subprocess.run(
                [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
            ).stdout.split()
            times[provider].append(float(line[0]) * 1000)
            imported[provider] = line[1] == "True"
    return {
        name: {"ms": round(statistics.median(values), 1), "openai_imported": imported[name]}
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deltas", type=int, default=DELTAS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    print(json.dumps({"streamed": streamed(args.deltas, args.rounds), "first_call": first_call()}, indent=2))


if __name__ == "__main__":
    main()
