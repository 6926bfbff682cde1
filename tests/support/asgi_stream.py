"""An in-process streaming client for an ASGI app that can drop the connection mid-stream.

httpx's ASGI transport reads a whole response before returning it, so it can neither watch a stream as it
comes nor cut it. `open_stream` runs the app as a task, hands over the response's SSE messages as the app
sends them, and `cut()` drops the connection as a network would: the app's next send fails (`OSError`, as
under uvicorn) and its `receive` says `http.disconnect`. The app task goes on (a run does not depend on its
client); `finished()` awaits it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.types import Message


@dataclass(eq=False)
class AsgiStream:
    """One request's response as it streams: `messages()` yields each SSE message's exact text."""

    status: int = 0
    _queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    _buffer: str = ""
    _gone: asyncio.Event = field(default_factory=asyncio.Event)
    _started: asyncio.Event = field(default_factory=asyncio.Event)
    body: str = ""  # a non-streamed answer's whole body
    task: asyncio.Task[None] | None = None

    async def _receive_from(self, pending: list[bytes]) -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if self._gone.is_set():
            raise OSError("connection reset by peer")
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self._started.set()
            return
        if message["type"] != "http.response.body":
            return
        self._buffer += message.get("body", b"").decode()
        while "\n\n" in self._buffer:
            text, self._buffer = self._buffer.split("\n\n", 1)
            if text and not text.startswith(":"):
                self._queue.put_nowait(text)
        if not message.get("more_body", False):
            self.body, self._buffer = self.body + self._buffer, ""
            self._queue.put_nowait(None)

    async def messages(self) -> AsyncIterator[str]:
        """Each SSE message (comments left out) until the response ends or is cut."""
        while not self._gone.is_set():
            text = await self._queue.get()
            if text is None:
                return
            yield text

    def cut(self) -> None:
        """Drop the connection: nothing more is received."""
        self._gone.set()

    async def finished(self) -> None:
        """Until the app's call has returned (after a cut it raises ClientDisconnect, as under uvicorn)."""
        if self.task is not None:
            with contextlib.suppress(Exception):
                await self.task


async def open_stream(
    app: Any,
    method: str,
    path: str,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
) -> AsgiStream:
    """Start the request; returns once the response has started (its status is known)."""
    stream = AsgiStream()
    raw = json.dumps(body).encode() if body is not None else b""
    pending = [raw]
    header_list = [(b"host", b"app"), (b"content-type", b"application/json")]
    header_list += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": urlencode(params or {}).encode(),
        "root_path": "",
        "headers": header_list,
        "client": ("127.0.0.1", 1),
        "server": ("app", 80),
    }
    stream.task = asyncio.create_task(app(scope, lambda: stream._receive_from(pending), stream._send))
    started = asyncio.create_task(stream._started.wait())
    await asyncio.wait({started, stream.task}, return_when=asyncio.FIRST_COMPLETED)
    started.cancel()
    if stream.task.done() and not stream._started.is_set():
        stream.task.result()  # the app failed before answering: its error
    return stream
