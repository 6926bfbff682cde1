"""The tests' SSE reader: httpx-sse's `EventSource` over an httpx response, each message's data as JSON.

A body read at once (ASGI transport tests, a Lambda's streamed bytes) is read through the same decoder by
wrapping it in an `httpx.Response` (`sse_response`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpx
from httpx_sse import EventSource

EVENT_STREAM = {"content-type": "text/event-stream"}


def sse_data(response: httpx.Response) -> Iterator[str]:
    """Each message's data (an `event:` name and `: ping` comments are not data)."""
    for message in EventSource(response).iter_sse():
        yield message.data


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for data in sse_data(response):
        yield json.loads(data)


async def aiter_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for message in EventSource(response).aiter_sse():
        yield json.loads(message.data)


def sse_response(body: str | bytes | Iterable[bytes]) -> httpx.Response:
    """An event stream's bytes (all at once, or as they arrive) as a response EventSource reads."""
    return httpx.Response(200, headers=EVENT_STREAM, content=body)


def query(client: httpx.Client, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    """POST /api/ap/query and read the whole stream."""
    with client.stream("POST", "/api/ap/query", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response))


def events_in(body: str) -> list[dict[str, Any]]:
    """The events of a whole SSE body read at once (ASGI transport tests)."""
    return list(sse_events(sse_response(body)))


def data_in(body: str | bytes) -> list[str]:
    """Each message's data in a whole SSE body (`[DONE]` included)."""
    return list(sse_data(sse_response(body)))
