"""A small SSE reader for tests: `data:` lines as JSON objects, comments and blank lines skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def query(client: httpx.Client, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    """POST /api/ap/query and read the whole stream."""
    with client.stream("POST", "/api/ap/query", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response))


def events_in(body: str) -> list[dict[str, Any]]:
    """The events of a whole SSE body read at once (ASGI transport tests)."""
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]
