"""The local server's HTTP/1.1 protocol: uvicorn's h11 protocol, with a bound on the wait for a request's head.

uvicorn closes a kept-alive connection that stays silent (`timeout_keep_alive`), but nothing bounds a new
connection that sends nothing, or a request head trickled a byte at a time: each would hold a connection
forever. Here the head must be complete within `head_timeout_s` of the connection opening or of its first
byte after a response; else the connection closes. The body has its own bound (`BodyLimit`, 408).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadTimeoutProtocol(H11Protocol):
    head_timeout_s: float = 30.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_for_head():
            self._arm()  # armed once per head: more bytes do not extend it
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._waiting_for_head():
            self.timeout_keep_alive_handler()  # uvicorn's own close of a silent connection


def head_timeout_protocol(seconds: float) -> type[HeadTimeoutProtocol]:
    """The protocol class for uvicorn's `http=` with this bound."""
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,), {"head_timeout_s": seconds})
