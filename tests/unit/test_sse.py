"""The SSE encoder: one `data:` line per event, and `: ping` comments while the source is silent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agent_core.protocol.sse import PING, encode_sse, with_pings


def test_encode_is_one_data_line_per_event() -> None:
    assert (
        encode_sse({"type": "content.delta", "delta": "你好"})
        == 'data: {"type":"content.delta","delta":"你好"}\n\n'.encode()
    )


async def test_pings_flow_while_the_source_is_silent_then_the_event_passes() -> None:
    release = asyncio.Event()

    async def source() -> AsyncIterator[bytes]:
        await release.wait()
        yield b"data: {}\n\n"

    received: list[bytes] = []
    async for chunk in with_pings(source(), interval_s=0.001):
        received.append(chunk)
        if chunk == PING and len(received) == 2:
            release.set()  # two pings seen while silent: now let the event through
    assert received[:2] == [PING, PING] and received[-1] == b"data: {}\n\n"
