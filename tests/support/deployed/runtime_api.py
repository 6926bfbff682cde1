"""The Lambda Runtime API (2018-06-01), served to one function process on loopback.

The documented paths: `GET /2018-06-01/runtime/invocation/next` (blocks until an invocation; the event is the
body, the headers `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`, `-Invoked-Function-Arn`, `-Trace-Id`),
`POST .../invocation/{id}/response`, `POST .../invocation/{id}/error`, `POST .../runtime/init/error`. A
response posted with `Lambda-Runtime-Function-Response-Mode: streaming` (chunked; for HTTP integrations a JSON
prelude, eight NUL bytes, then the body) is handed to the caller chunk by chunk as it arrives, as a Function
URL in RESPONSE_STREAM mode does.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import Loopback, LoopbackServer
from tests.support.sse import sse_data, sse_response

PREFIX = "/2018-06-01/runtime"
STREAM_SEPARATOR = b"\x00" * 8
_END = object()


class FunctionError(Exception):
    """The function reported an error (invocation or init): the Runtime API's error document."""

    def __init__(self, kind: str, payload: dict[str, Any]) -> None:
        super().__init__(f"{kind}: {payload.get('errorType')}: {payload.get('errorMessage')}")
        self.kind = kind
        self.payload = payload


@dataclass
class Invocation:
    event: bytes
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    done: threading.Event = field(default_factory=threading.Event)
    result: bytes | None = None
    error: dict[str, Any] | None = None
    chunks: queue.Queue[Any] = field(default_factory=queue.Queue)  # streamed body pieces, then _END
    streaming: bool = False
    started: threading.Event = field(default_factory=threading.Event)  # response (or error) begun


@dataclass
class StreamedResponse:
    """A streamed HTTP integration response: the prelude, then the body as it arrives."""

    status: int
    headers: dict[str, str]
    cookies: list[str]
    _invocation: Invocation
    _rest: bytes

    def iter_bytes(self, timeout: float = 60) -> Iterator[bytes]:
        if self._rest:
            yield self._rest
        while True:
            piece = self._invocation.chunks.get(timeout=timeout)
            if piece is _END:
                return
            yield piece

    def sse_data(self, timeout: float = 60) -> Iterator[str]:
        """Each SSE message's data, as the bytes arrive (`[DONE]` included)."""
        return sse_data(sse_response(self.iter_bytes(timeout)))

    def sse_events(self, timeout: float = 60) -> Iterator[dict[str, Any]]:
        for data in self.sse_data(timeout):
            if data != "[DONE]":
                yield json.loads(data)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", (headers or {}).get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_all(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return b"".join(self._chunks())
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers (Lambda-Runtime-Function-Error-Type/-Body) are not used here
                return
            piece = self.rfile.read(size)
            self.rfile.readline()
            yield piece

    def do_GET(self) -> None:
        if self.path != f"{PREFIX}/invocation/next":
            self._reply(404, b'{"errorMessage": "unknown path"}')
            return
        api = self.server.api
        api.mark_ready()
        invocation = api.pending.get()
        api.current[invocation.request_id] = invocation
        deadline_ms = int((time.time() + api.timeout_s) * 1000)
        self._reply(
            200,
            invocation.event,
            {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": api.function_arn,
                "Lambda-Runtime-Trace-Id": f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=1",
            },
        )

    def do_POST(self) -> None:
        api = self.server.api
        if self.path == f"{PREFIX}/init/error":
            api.init_error = json.loads(self._read_all() or b"{}")
            api.mark_ready()
            self._reply(202, b'{"status": "OK"}')
            return
        parts = self.path[len(f"{PREFIX}/invocation/") :].split("/")
        invocation = api.current.get(parts[0]) if self.path.startswith(f"{PREFIX}/invocation/") else None
        if invocation is None or len(parts) != 2 or parts[1] not in ("response", "error"):
            self._read_all()
            self._reply(404, b'{"errorMessage": "unknown invocation"}')
            return
        if parts[1] == "error":
            invocation.error = json.loads(self._read_all() or b"{}")
            invocation.started.set()
        elif self.headers.get("Lambda-Runtime-Function-Response-Mode", "").lower() == "streaming":
            invocation.streaming = True
            invocation.started.set()
            for piece in self._chunks():
                invocation.chunks.put(piece)
        else:
            invocation.result = self._read_all()
            invocation.started.set()
        invocation.chunks.put(_END)
        invocation.done.set()
        self._reply(202, b'{"status": "OK"}')


class _Server(LoopbackServer):
    api: RuntimeApi

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A function process stopped while it waited on `next`: not an error of the API."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class RuntimeApi(Loopback):
    """One function's Runtime API: `invoke` (buffered) and `invoke_streaming` (HTTP integration stream)."""

    def __init__(self, function_arn: str, timeout_s: int) -> None:
        self.function_arn = function_arn
        self.timeout_s = timeout_s
        self.pending: queue.Queue[Invocation] = queue.Queue()
        self.current: dict[str, Invocation] = {}
        self.init_error: dict[str, Any] | None = None
        self.ready = threading.Event()
        self.ready_at: float | None = None  # monotonic time of the first `next` (the end of init)
        server = _Server(("127.0.0.1", 0), _Handler)
        server.api = self
        super().__init__(server, "runtime-api", poll_s=0.05)
        self.address = self.origin.removeprefix("http://")  # AWS_LAMBDA_RUNTIME_API: host:port
        self.start()

    def mark_ready(self) -> None:
        if not self.ready.is_set():
            self.ready_at = time.monotonic()
            self.ready.set()

    def _submit(self, event: Any) -> Invocation:
        invocation = Invocation(event=json.dumps(event).encode())
        self.pending.put(invocation)
        return invocation

    def invoke(self, event: Any, timeout: float = 60) -> Any:
        """Invoke synchronously (RequestResponse): the function's JSON result, or FunctionError."""
        invocation = self._submit(event)
        if not invocation.done.wait(timeout):
            raise TimeoutError(f"no response within {timeout} s")
        if invocation.error is not None:
            raise FunctionError("invocation error", invocation.error)
        assert invocation.result is not None
        return json.loads(invocation.result)

    def invoke_streaming(self, event: Any, timeout: float = 60) -> StreamedResponse:
        """Invoke with response streaming; returns once the prelude (status, headers) has arrived."""
        invocation = self._submit(event)
        if not invocation.started.wait(timeout):
            raise TimeoutError(f"no response within {timeout} s")
        if invocation.error is not None:
            raise FunctionError("invocation error", invocation.error)
        head = b""
        while STREAM_SEPARATOR not in head:
            piece = invocation.chunks.get(timeout=timeout)
            if piece is _END:
                raise AssertionError(f"stream ended before its prelude: {head[:200]!r}")
            head += piece
        prelude, rest = head.split(STREAM_SEPARATOR, 1)
        meta = json.loads(prelude)
        return StreamedResponse(
            status=int(meta.get("statusCode", 200)),
            headers={k.lower(): v for k, v in (meta.get("headers") or {}).items()},
            cookies=list(meta.get("cookies") or []),
            _invocation=invocation,
            _rest=rest,
        )
