"""The SSE response of a route whose turn holds its chat's lease (see runtime/pending.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Mapping

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from agent_core.runtime.pending import HeldTurn


class TurnStreamingResponse(StreamingResponse):
    """However the response ends (the client left before the first byte, the body closed before its first
    iteration, sending failed, or the whole run streamed), the turn is settled before it returns: released
    if its events never started, else its end stored. Nothing is left to the lease's expiry."""

    def __init__(self, content: AsyncIterable[bytes], turn: HeldTurn, headers: Mapping[str, str]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.turn = turn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: a cancelled request does not interrupt the release.
            await asyncio.shield(self._settle())

    async def _settle(self) -> None:
        # A body left at a yield (sending failed) is closed now, which ends a run it drives.
        close = getattr(self.body_iterator, "aclose", None)
        if close is not None:
            await close()
        await self.turn.settle()
