"""The client wires' encoders (Chat Completions, UI message stream, AG-UI) against the native SSE encoder.

The same run as `bench.responses_encoder` (an in-process model streaming DELTAS content deltas, the real
turn on the in-memory table), encoded as it arrives by one encoder per run; `encode_us` is the time to
turn one native envelope into its wire bytes, `added_us_*` a wire's extra over native.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_core.api.sse import sse_message
from agent_core.runtime.envelope import Envelope
from agent_core.wires.ag_ui import AgUiEncoder, event_json
from agent_core.wires.chat_completions.encoder import ChatCompletionsEncoder
from agent_core.wires.ui_stream import UiStreamEncoder
from bench.common import quiet_observability
from bench.responses_encoder import DELTAS, ROUNDS, Encode, _run, _summary, native


def chat_completions() -> Encode:
    encoder = ChatCompletionsEncoder(
        "chatcmpl-bench", created=int(time.time()), model="main-agent", client_tools=frozenset(), include_usage=True
    )
    opening = encoder.opening()

    def encode(envelope: Envelope) -> list[bytes]:
        chunks = encoder.encode(envelope)
        if opening:
            chunks, opening[:] = [*opening, *chunks], []
        return [sse_message(c).encode() for c in chunks]

    return encode


def ui_stream() -> Encode:
    encoder = UiStreamEncoder("msg_bench")
    opening = encoder.opening()

    def encode(envelope: Envelope) -> list[bytes]:
        parts = encoder.encode(envelope)
        if opening:
            parts, opening[:] = [*opening, *parts], []
        return [sse_message(p).encode() for p in parts]

    return encode


def ag_ui() -> Encode:
    encoder = AgUiEncoder("thread-bench", "run-bench")
    opening = encoder.opening()

    def encode(envelope: Envelope) -> list[bytes]:
        events = encoder.encode(envelope)
        if opening:
            events, opening[:] = [*opening, *events], []
        return [sse_message(event_json(e)).encode() for e in events]

    return encode


WIRES = {"chat_completions": chat_completions, "ui_stream": ui_stream, "ag_ui": ag_ui}


async def _measure(deltas: int, rounds: int) -> dict[str, Any]:
    await _run(native(), deltas)  # warm-up: imports, first-call caches
    runs: dict[str, list[dict[str, Any]]] = {"native": [], **{name: [] for name in WIRES}}
    for _ in range(rounds):  # interleaved, so drift affects every wire alike
        runs["native"].append(await _run(native(), deltas))
        for name, make in WIRES.items():
            runs[name].append(await _run(make(), deltas))
    result: dict[str, Any] = {"deltas": deltas, "rounds": rounds}
    for name, wire_runs in runs.items():
        result[name] = _summary(wire_runs)
    for name in WIRES:
        for p in ("p50", "p99"):
            key = f"encode_us_{p}"
            result[name][f"added_us_{p}"] = round(result[name][key] - result["native"][key], 2)
    return result


def run(deltas: int = DELTAS, rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    result = asyncio.run(_measure(deltas, rounds))
    print(result)
    return result


if __name__ == "__main__":
    run()
