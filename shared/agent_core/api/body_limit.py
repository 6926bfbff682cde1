"""Request bodies are bounded before the app sees them: never more than the limit is read (413 otherwise),
and never for longer than the read timeout (408 otherwise)."""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core.api.errors import error_body

CODE = "request_too_large"
TIMEOUT_CODE = "request_timeout"


class BodyLimit:
    """Pure ASGI middleware: reads the body up to `max_bytes`, then hands it to the app in one message.

    A Content-Length over the limit is refused without reading; a body that turns out longer than the
    limit (no Content-Length, chunked, or a Content-Length that lies) is refused as soon as it passes it.
    Either way the answer is 413 `request_too_large` and the app is never called.

    The whole body must arrive within `read_timeout_s` (from when the request's headers were read): a client
    trickling it (one byte at a time) gets 408 `request_timeout` with `Connection: close`, and the server
    closes the connection instead of holding it, and a task, forever.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, read_timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _refuse(send, 413, CODE, f"the request body exceeds {self.max_bytes} bytes")
            return
        try:
            async with asyncio.timeout(self.read_timeout_s):
                body = await self._read(receive)
        except TimeoutError:
            message = f"the request body did not arrive within {self.read_timeout_s:g} s"
            await _refuse(send, 408, TIMEOUT_CODE, message, close=True)
            return
        except _TooLarge:
            await _refuse(send, 413, CODE, f"the request body exceeds {self.max_bytes} bytes")
            return
        if body is not None:
            await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None when the client went away; _TooLarge as soon as it passes the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # the client went away before sending its body: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _TooLarge(Exception):
    """The body passed the limit while being read."""


async def _refuse(send: Send, status: int, code: str, message: str, *, close: bool = False) -> None:
    """A JSON error answer; `close` asks the server to close the connection after it (a body left unread)."""
    payload = json.dumps(error_body(code, message, "invalid_request_error")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, once; then the server's own messages (a streaming route waits for disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
