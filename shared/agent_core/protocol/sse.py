"""The native SSE encoder: `data: <json>\n\n` per event, `: ping` comments while idle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

PING = b": ping\n\n"


def encode_sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def with_pings(source: AsyncIterator[bytes], interval_s: float) -> AsyncIterator[bytes]:
    """Forward `source` chunk by chunk; while it is silent for `interval_s`, send a ping comment."""
    iterator = source.__aiter__()
    pending: asyncio.Task[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=interval_s)
            if not done:
                yield PING
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                return
            finally:
                if done:
                    pending = None
            yield chunk
    finally:
        if pending is not None:
            pending.cancel()  # the source's step ends itself under the cancellation
        else:  # the source waits at a yield: close it now, not when it is garbage collected
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()
