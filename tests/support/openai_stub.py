"""A scripted, loopback OpenAI-compatible Chat Completions server (stdlib only) for tests and benchmarks."""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import Loopback, LoopbackServer

# How often the serving thread looks for a stop request: a stub stops within this (tests start one each).
DEFAULT_REPLY = "stub reply"


@dataclass
class Chunk:
    """One streamed chunk: any of content, reasoning, tool-call fragments, finish reason, usage."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None

    def to_json(self, seq: int, model: str) -> dict[str, Any]:
        """The wire form of this chunk (usage-only chunks have `choices: []`)."""
        body: dict[str, Any] = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
        }
        delta: dict[str, Any] = {}
        if seq == 0:
            delta["role"] = "assistant"
        if self.content is not None:
            delta["content"] = self.content
        if self.reasoning is not None:
            delta["reasoning_content"] = self.reasoning
        if self.tool_calls:
            delta["tool_calls"] = self.tool_calls
        if delta or self.finish_reason or self.usage is None:
            body["choices"] = [{"index": 0, "delta": delta, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            p, c = self.usage
            body["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return body


def tool_fragment(index: int, *, id: str | None = None, name: str | None = None, arguments: str = "") -> dict[str, Any]:
    """One wire tool-call fragment; id, type and name only on the first fragment of a call."""
    frag: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        frag["id"] = id
        frag["type"] = "function"
    if name is not None:
        frag["function"]["name"] = name
    return frag


@dataclass
class StubScript:
    """One scripted answer: a chunk list, or an error (status, JSON body, headers)."""

    chunks: list[Chunk] = field(default_factory=list)
    status: int = 200
    error_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    gate: threading.Event | None = None
    chunk_delay_s: float = 0.0
    abort_after: int | None = None
    before_chunk: Callable[[int], None] | None = None  # called before chunk n >= 1 (lockstep tests)
    done: bool = True  # end with `data: [DONE]` (False: the body just ends, properly terminated)
    garble_at: int | None = None  # chunk n is sent as broken JSON
    drop: bool = False  # the connection closes before any response (no status line): a connection error

    @classmethod
    def text(
        cls,
        *pieces: str,
        reasoning: Iterable[str] = (),
        finish_reason: str = "stop",
        usage: tuple[int, int] | None = (11, 7),
        gate: threading.Event | None = None,
    ) -> StubScript:
        """Reasoning pieces, then content pieces, then a finish chunk and a usage chunk."""
        chunks = [Chunk(reasoning=r) for r in reasoning] + [Chunk(content=p) for p in pieces]
        chunks.append(Chunk(finish_reason=finish_reason))
        if usage is not None:
            chunks.append(Chunk(usage=usage))
        return cls(chunks=chunks, gate=gate)

    @classmethod
    def tool_calls(
        cls,
        calls: list[dict[str, Any]],
        *,
        piece_size: int = 8,
        interleave: bool = False,
        usage: tuple[int, int] | None = (20, 9),
    ) -> StubScript:
        """Tool calls ({"id", "name", "arguments"}) streamed as split argument fragments by index."""
        per_call: list[list[dict[str, Any]]] = []
        for index, call in enumerate(calls):
            args = call.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args)
            pieces = [args[i : i + piece_size] for i in range(0, len(args), piece_size)] or [""]
            frags = [tool_fragment(index, id=call["id"], name=call["name"])]
            frags += [tool_fragment(index, arguments=p) for p in pieces]
            per_call.append(frags)
        chunks: list[Chunk] = []
        if interleave:
            for row in range(max(len(f) for f in per_call)):
                chunks += [Chunk(tool_calls=[f[row]]) for f in per_call if row < len(f)]
        else:
            chunks = [Chunk(tool_calls=[frag]) for frags in per_call for frag in frags]
        chunks.append(Chunk(finish_reason="tool_calls"))
        if usage is not None:
            chunks.append(Chunk(usage=usage))
        return cls(chunks=chunks)

    @classmethod
    def error(
        cls,
        status: int,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = 1,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> StubScript:
        """An error response with an OpenAI-style JSON error body.

        It says when to retry: `Retry-After: <retry_after>` when given, else `retry-after-ms` (1 ms unless
        None), which the openai SDK waits instead of its backoff (0.5 s and up), so retrying tests stay fast.
        """
        hdrs = dict(headers or {})
        if retry_after is not None:
            hdrs["Retry-After"] = f"{retry_after:g}"
        elif retry_after_ms is not None:
            hdrs["retry-after-ms"] = f"{retry_after_ms:g}"
        err = body or {"error": {"message": message or f"stub error {status}", "type": "stub_error", "code": None}}
        return cls(status=status, error_body=err, headers=hdrs)


class _Handler(BaseHTTPRequestHandler):
    """Serves POST /v1/chat/completions from the owning stub's script queue."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: without it the first chunk waits behind the headers for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet."""

    def do_POST(self) -> None:
        """Record the request and play the next script."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?")[0].rstrip("/").endswith("/embeddings"):
            self._embeddings(json.loads(raw or b"{}"))
            return
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        body: dict[str, Any] = json.loads(raw or b"{}")
        script = self.server.stub._record(body, dict(self.headers.items()))
        if script.drop:
            self.close_connection = True
        elif script.error_body is not None or script.status >= 400:
            self._send_json(script.status, script.error_body or {}, script.headers)
        elif body.get("stream"):
            self._stream(script, str(body.get("model", "stub-model")))
        else:
            self._send_json(200, _completion(script, str(body.get("model", "stub-model"))), script.headers)

    def _embeddings(self, body: dict[str, Any]) -> None:
        """POST /v1/embeddings: a bag-of-words vector per input (float list, or base64 float32 as the SDK asks)."""
        self.server.stub.embedding_requests.append(body)
        self.server.stub.embedding_headers.append({k.lower(): v for k, v in self.headers.items()})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 1536)
        data = []
        for index, text in enumerate(texts):
            vector = word_vector(str(text), dims)
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        usage = {"prompt_tokens": sum(len(str(t).split()) for t in texts), "total_tokens": 0}
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, script: StubScript, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in script.headers.items():
            self.send_header(key, value)
        self.end_headers()
        for seq, chunk in enumerate(script.chunks):
            if script.abort_after is not None and seq >= script.abort_after:
                self.close_connection = True
                return
            if seq == 1 and script.gate is not None:
                script.gate.wait(timeout=10)
            if seq and script.before_chunk is not None:
                script.before_chunk(seq)
            if seq and script.chunk_delay_s:
                time.sleep(script.chunk_delay_s)
            data = json.dumps(chunk.to_json(seq, model))
            self._write_event(data[: len(data) // 2] if seq == script.garble_at else data)
        if script.abort_after is not None and script.abort_after <= len(script.chunks):
            self.close_connection = True
            return
        if script.done:
            self._write_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()


def _completion(script: StubScript, model: str) -> dict[str, Any]:
    """Fold a chunk script into one non-streaming chat.completion body."""
    content = "".join(c.content or "" for c in script.chunks)
    reasoning = "".join(c.reasoning or "" for c in script.chunks)
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = "stop", (0, 0)
    for chunk in script.chunks:
        for frag in chunk.tool_calls:
            call = calls.setdefault(frag["index"], {"id": "", "type": "function", "function": {}})
            call["id"] = frag.get("id") or call["id"]
            fn = call["function"]
            fn["name"] = frag["function"].get("name") or fn.get("name", "")
            fn["arguments"] = fn.get("arguments", "") + frag["function"].get("arguments", "")
        finish = chunk.finish_reason or finish
        usage = chunk.usage or usage
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def word_vector(text: str, dimensions: int) -> list[float]:
    """A stand-in embedding: each lower-cased word counted in a bucket of its CRC-32 (texts sharing words are
    close; the embedder under test must still normalise it)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    return vector


class _Server(LoopbackServer):
    stub: OpenAiStub


class OpenAiStub(Loopback):
    """A loopback OpenAI-compatible server in a background thread; enqueue scripts, read `requests`."""

    def __init__(self, default_reply: str = DEFAULT_REPLY) -> None:
        self.default_reply = default_reply
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.embedding_requests: list[dict[str, Any]] = []  # POST /v1/embeddings bodies, in order
        self.embedding_headers: list[dict[str, str]] = []  # their headers (lower-cased names)
        self._scripts: deque[StubScript] = deque()
        self._lock = threading.Lock()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        super().__init__(server, "openai-stub")

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ending in /v1."""
        return f"{self.origin}/v1"

    @property
    def authorizations(self) -> list[str | None]:
        """The Authorization header of every request received, in order."""
        return [{k.lower(): v for k, v in h.items()}.get("authorization") for h in self.headers]

    def enqueue(self, *scripts: StubScript) -> None:
        """Queue scripts; each request consumes one, in order."""
        with self._lock:
            self._scripts.extend(scripts)

    def discard_pending(self) -> None:
        """Drop the scripts no request consumed: a deadline that fires before the request reaches the stub
        (a loaded machine) leaves its script queued, and the next request must not be served it."""
        with self._lock:
            self._scripts.clear()

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> StubScript:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self._scripts.popleft() if self._scripts else StubScript.text(self.default_reply)
