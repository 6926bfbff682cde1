"""Oversized requests against `agent-core serve`: each refused before any work, server memory flat.

`python -m bench.input_bounds`: a 60 MB /v1/responses body (2,000 input items of 30 KB), 262,144 characters
of instructions, a 500 KB item to /v1/conversations and an 80 MB body with no Content-Length (chunked).
Prints status, error code, seconds and the server's resident memory before and after.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from tests.support.local_server import local_server

MB = 1_000_000


def _rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    yield b'{"input": "'
    for _ in range(total // size):
        yield b"x" * size


def run() -> dict[str, Any]:
    items = [{"role": "user", "content": "x" * 30000} for _ in range(2000)]
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("2000 items x 30 KB", "/v1/responses", {"content": json.dumps({"input": items}).encode()}),
        ("instructions 262144 chars", "/v1/responses", {"json": {"input": "hi", "instructions": "i" * 262144}}),
        (
            "500 KB item",
            "/v1/conversations",
            {"json": {"items": [{"type": "message", "role": "user", "content": "x" * 500_000}]}},
        ),
        ("80 MB chunked body", "/v1/responses", {"content": _chunks(80 * MB)}),
    ]
    result: dict[str, Any] = {}
    with local_server() as (base, process), httpx.Client(base_url=base, timeout=300) as client:
        client.get("/v1/models")
        result["rss_mib_before"] = _rss_mib(process.pid)
        for name, path, kwargs in cases:
            started = time.perf_counter()
            answer = client.post(path, headers={"content-type": "application/json"}, **kwargs)
            seconds = round(time.perf_counter() - started, 3)
            result[name] = {"status": answer.status_code, "code": answer.json()["error"]["code"], "s": seconds}
        result["rss_mib_after"] = _rss_mib(process.pid)
    print(result)
    return result


if __name__ == "__main__":
    run()
