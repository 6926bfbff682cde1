"""A scripted, loopback Amazon Bedrock Runtime server (stdlib only) speaking ConverseStream's real framing.

ConverseStream answers with the AWS event-stream binary format: each message is a prelude (total length,
headers length, CRC32 of those 8 bytes), headers (`:event-type`, `:content-type`, `:message-type`, or
`:exception-type` for an exception), a JSON payload and a CRC32 of everything before it. The encoder below
writes that format itself; the real boto3 client (pointed here with AWS_ENDPOINT_URL_BEDROCK_RUNTIME) parses it.

It also answers ApplyGuardrail (`POST /guardrail/{id}/version/{version}/apply`, JSON in and out, the shapes of
botocore's service model): scripted answers, else e-mail addresses anonymized.
"""

from __future__ import annotations

import binascii
import itertools
import json
import re
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from tests.support.loopback import Loopback, LoopbackServer
from tests.support.openai_stub import word_vector

# How often the serving thread looks for a stop request: a stub stops within this (tests start one each).
DEFAULT_REPLY = "bedrock stub reply"
_STRING_HEADER = 7  # the event-stream header value type of a UTF-8 string


def encode_headers(headers: dict[str, str]) -> bytes:
    """Event-stream headers: name length (1 byte), name, type 7 (string), value length (2 bytes), value."""
    out = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING_HEADER, len(raw_value))
        out += raw_value
    return out


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, prelude CRC, headers, payload, message CRC (big-endian)."""
    raw_headers = encode_headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + raw_headers + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


@dataclass
class Frame:
    """One stream message: an event (`messageStart`, `contentBlockDelta`, ...) or an exception."""

    type: str
    payload: dict[str, Any]
    exception: bool = False

    def encode(self) -> bytes:
        if self.exception:
            headers = {":exception-type": self.type, ":content-type": "application/json", ":message-type": "exception"}
        else:
            headers = {":event-type": self.type, ":content-type": "application/json", ":message-type": "event"}
        return encode_message(headers, json.dumps(self.payload).encode())


def _usage(usage: tuple[int, ...]) -> Frame:
    inp, out, *cache = (*usage, 0, 0)
    body: dict[str, Any] = {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out}
    if cache[0]:
        body["cacheReadInputTokens"] = cache[0]
    if cache[1]:
        body["cacheWriteInputTokens"] = cache[1]
    return Frame("metadata", {"usage": body, "metrics": {"latencyMs": 5}})


@dataclass
class BedrockScript:
    """One scripted answer: stream frames, or an HTTP error (status, AWS error type, message)."""

    frames: list[Frame] = field(default_factory=list)
    # Frames after the first content delta wait for this event (proves the client reads without buffering).
    gate: threading.Event | None = None
    gate_timed_out: bool = False  # set when the gate was never opened (the client saw nothing before it)
    status: int = 200
    error_type: str = ""
    error_message: str = ""

    @classmethod
    def text(
        cls,
        *pieces: str,
        reasoning: Iterable[str] = (),
        stop_reason: str = "end_turn",
        usage: tuple[int, ...] | None = (11, 7),
    ) -> BedrockScript:
        """A reasoning block (if any), then a text block of the pieces, messageStop and metadata."""
        frames = [Frame("messageStart", {"role": "assistant"})]
        index = 0
        thoughts = list(reasoning)
        if thoughts:
            frames += [
                Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": t}}})
                for t in thoughts
            ]
            signature = {"reasoningContent": {"signature": "sig"}}
            frames.append(Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": signature}))
            frames.append(Frame("contentBlockStop", {"contentBlockIndex": 0}))
            index = 1
        frames += [Frame("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": p}}) for p in pieces]
        frames.append(Frame("contentBlockStop", {"contentBlockIndex": index}))
        frames.append(Frame("messageStop", {"stopReason": stop_reason}))
        if usage is not None:
            frames.append(_usage(usage))
        return cls(frames=frames)

    @classmethod
    def tool_calls(
        cls, calls: list[dict[str, Any]], *, lead: str = "", piece_size: int = 8, usage: tuple[int, ...] = (20, 9)
    ) -> BedrockScript:
        """Optional lead text, then one toolUse block per call ({"id", "name", "input"}) with split input."""
        frames = [Frame("messageStart", {"role": "assistant"})]
        index = 0
        if lead:
            frames.append(Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": lead}}))
            frames.append(Frame("contentBlockStop", {"contentBlockIndex": 0}))
            index = 1
        for call in calls:
            start = {"toolUse": {"toolUseId": call["id"], "name": call["name"]}}
            frames.append(Frame("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            raw = json.dumps(call.get("input", {}))
            for i in range(0, len(raw), piece_size):
                delta = {"toolUse": {"input": raw[i : i + piece_size]}}
                frames.append(Frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
            frames.append(Frame("contentBlockStop", {"contentBlockIndex": index}))
            index += 1
        frames.append(Frame("messageStop", {"stopReason": "tool_use"}))
        frames.append(_usage(usage))
        return cls(frames=frames)

    @classmethod
    def error(cls, status: int, error_type: str, message: str = "") -> BedrockScript:
        """An HTTP error as Bedrock sends it: a JSON `message` body and the `x-amzn-ErrorType` header."""
        return cls(status=status, error_type=error_type, error_message=message or f"stub {error_type}")

    @classmethod
    def interrupted(cls, *pieces: str, exception: str = "modelStreamErrorException") -> BedrockScript:
        """Text pieces, then an exception message in the stream (an error after output started)."""
        frames = [Frame("messageStart", {"role": "assistant"})]
        frames += [Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}}) for p in pieces]
        frames.append(Frame(exception, {"message": "stub stream failure"}, exception=True))
        return cls(frames=frames)


GUARDRAIL_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


@dataclass
class GuardrailScript:
    """One ApplyGuardrail answer: a response body (its real shape: action, outputs, assessments), or an error."""

    response: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    error_type: str = ""

    @classmethod
    def none(cls) -> GuardrailScript:
        return cls({"action": "NONE", "outputs": [], "assessments": [{}], "usage": _guardrail_usage()})

    @classmethod
    def masked(cls, text: str, matches: list[tuple[str, str]]) -> GuardrailScript:
        """Bedrock anonymized each (type, match): the output text has `{TYPE}` in its place."""
        output = text
        for kind, match in matches:
            output = output.replace(match, "{" + kind + "}")
        entities = [{"match": m, "type": k, "action": "ANONYMIZED", "detected": True} for k, m in matches]
        assessment = {"sensitiveInformationPolicy": {"piiEntities": entities}}
        return cls(
            {
                "action": "GUARDRAIL_INTERVENED",
                "actionReason": "Guardrail masked.",
                "outputs": [{"text": output}],
                "assessments": [assessment],
                "usage": _guardrail_usage(),
            }
        )

    @classmethod
    def blocked(cls, topic: str = "Investment advice") -> GuardrailScript:
        """A denied topic: the guardrail's blocked message as the output."""
        topics = [{"name": topic, "type": "DENY", "action": "BLOCKED", "detected": True}]
        return cls(
            {
                "action": "GUARDRAIL_INTERVENED",
                "actionReason": "Guardrail blocked.",
                "outputs": [{"text": "Sorry, the model cannot answer this question."}],
                "assessments": [{"topicPolicy": {"topics": topics}}],
                "usage": _guardrail_usage(),
            }
        )

    @classmethod
    def error(cls, status: int, error_type: str) -> GuardrailScript:
        return cls(status=status, error_type=error_type)


def _guardrail_usage() -> dict[str, int]:
    return {"topicPolicyUnits": 1, "contentPolicyUnits": 1, "wordPolicyUnits": 1, "sensitiveInformationPolicyUnits": 1}


def default_guardrail(body: dict[str, Any]) -> GuardrailScript:
    """With nothing scripted: e-mail addresses anonymized (EMAIL), anything else let through."""
    text = "".join(block.get("text", {}).get("text", "") for block in body.get("content") or [])
    emails = [("EMAIL", m) for m in dict.fromkeys(GUARDRAIL_EMAIL.findall(text))]
    return GuardrailScript.masked(text, emails) if emails else GuardrailScript.none()


def converse_problem(body: dict[str, Any]) -> str | None:
    """The ValidationException Bedrock answers for a request breaking Converse's rules, else None."""
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        return "A conversation must start with a user message."
    roles = [m.get("role") for m in messages]
    if any(a == b for a, b in itertools.pairwise(roles)):
        return "A conversation must alternate between user and assistant roles."
    blocks = [block for m in messages for block in m.get("content") or []]
    if any(not block for block in blocks) or any(block.get("text") == "" for block in blocks):
        return "The text field in the ContentBlock object is blank."
    if "toolConfig" not in body and any("toolUse" in b or "toolResult" in b for b in blocks):
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    return None


class _Handler(BaseHTTPRequestHandler):
    """Serves POST /model/{modelId}/converse-stream from the owning stub's script queue."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = self.path.split("?")[0].split("/")
        if len(parts) == 6 and parts[1] == "guardrail" and parts[3] == "version" and parts[5] == "apply":
            self._apply_guardrail(unquote(parts[2]), unquote(parts[4]), json.loads(raw or b"{}"))
            return
        if len(parts) == 4 and parts[1] == "model" and parts[3] == "invoke":
            self._invoke(unquote(parts[2]), json.loads(raw or b"{}"))
            return
        if len(parts) != 4 or parts[1] != "model" or parts[3] != "converse-stream":
            self._send_error(404, "UnknownOperationException", f"no route {self.path}")
            return
        body: dict[str, Any] = json.loads(raw or b"{}")
        script = self.server.stub._record(unquote(parts[2]), body, dict(self.headers.items()))
        if (problem := converse_problem(body)) is not None:
            self._send_error(400, "ValidationException", problem)
            return
        if script.status >= 400:
            self._send_error(script.status, script.error_type, script.error_message)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", "stub-request")
        self.end_headers()
        gated = False
        for frame in script.frames:
            if script.gate is not None and gated and not script.gate.wait(timeout=10):
                script.gate_timed_out = True
            gated = gated or frame.type == "contentBlockDelta"
            data = frame.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _invoke(self, model_id: str, body: dict[str, Any]) -> None:
        """InvokeModel for Titan Text Embeddings v2: `{inputText, dimensions, normalize}` -> `{embedding}`."""
        self.server.stub.invocations.append(BedrockCall(model_id, body, dict(self.headers.items())))
        if "inputText" not in body or not model_id.startswith("amazon.titan-embed"):
            self._send_error(400, "ValidationException", "not a Titan embeddings request")
            return
        text = str(body["inputText"])
        vector = word_vector(text, int(body.get("dimensions") or 1024))
        data = json.dumps({"embedding": vector, "inputTextTokenCount": len(text.split())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _apply_guardrail(self, guardrail_id: str, version: str, body: dict[str, Any]) -> None:
        """ApplyGuardrail: POST /guardrail/{id}/version/{version}/apply, a JSON body in and out."""
        stub = self.server.stub
        script = stub._guardrail(GuardrailCall(guardrail_id, version, body, dict(self.headers.items())))
        if script.status >= 400:
            self._send_error(script.status, script.error_type, f"stub {script.error_type}")
            return
        data = json.dumps(script.response).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, error_type: str, message: str) -> None:
        data = json.dumps({"message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/")
        self.end_headers()
        self.wfile.write(data)


class _Server(LoopbackServer):
    stub: BedrockStub


@dataclass
class BedrockCall:
    """One request received: the model id from the path, the JSON body, the headers."""

    model_id: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class GuardrailCall:
    """One ApplyGuardrail request: the guardrail id and version from the path, the JSON body, the headers."""

    guardrail_id: str
    version: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def text(self) -> str:
        return "".join(block.get("text", {}).get("text", "") for block in self.body.get("content") or [])


class BedrockStub(Loopback):
    """A loopback Bedrock Runtime in a background thread; enqueue scripts, read `calls`."""

    def __init__(self, default_reply: str = DEFAULT_REPLY) -> None:
        self.default_reply = default_reply
        self.calls: list[BedrockCall] = []
        self.invocations: list[BedrockCall] = []  # InvokeModel (embeddings) requests, in order
        self.guardrail_calls: list[GuardrailCall] = []  # ApplyGuardrail requests, in order
        self._guardrail_scripts: deque[GuardrailScript] = deque()
        self._scripts: deque[BedrockScript] = deque()
        # Consulted before the queue: a script chosen by the request (calls whose order is not fixed).
        self.responder: Callable[[BedrockCall], BedrockScript | None] | None = None
        self._lock = threading.Lock()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        super().__init__(server, "bedrock-stub")

    @property
    def endpoint_url(self) -> str:
        return self.origin

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON body of every request, in order."""
        return [call.body for call in self.calls]

    def enqueue(self, *scripts: BedrockScript) -> None:
        with self._lock:
            self._scripts.extend(scripts)

    def enqueue_guardrail(self, *scripts: GuardrailScript) -> None:
        """ApplyGuardrail answers, in order; with none left, `default_guardrail` answers."""
        with self._lock:
            self._guardrail_scripts.extend(scripts)

    def _guardrail(self, call: GuardrailCall) -> GuardrailScript:
        with self._lock:
            self.guardrail_calls.append(call)
            if self._guardrail_scripts:
                return self._guardrail_scripts.popleft()
        return default_guardrail(call.body)

    def _record(self, model_id: str, body: dict[str, Any], headers: dict[str, str]) -> BedrockScript:
        with self._lock:
            call = BedrockCall(model_id, body, headers)
            self.calls.append(call)
            if self.responder is not None and (script := self.responder(call)) is not None:
                return script
            return self._scripts.popleft() if self._scripts else BedrockScript.text(self.default_reply)
