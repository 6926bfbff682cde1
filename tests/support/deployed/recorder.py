"""A recording reverse proxy in front of moto: every call, by caller (the SigV4 access key), as IAM sees it.

Each request is forwarded unchanged; the proxy records the access key of its credential (header or presigned
query), the API operation (`X-Amz-Target`, the query protocol's `Action`, or the S3 REST method and path) and
the IAM actions AWS authorises that operation with (transactions per item, batches as their single-message
action).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.loopback import Loopback, LoopbackServer


@dataclass(frozen=True)
class Call:
    """One recorded AWS call: who (access key id), the IAM action it needs, moto's status."""

    access_key: str
    operation: str  # the API operation called, e.g. dynamodb:TransactWriteItems
    actions: tuple[str, ...]  # the IAM actions AWS authorises it with, e.g. dynamodb:PutItem, dynamodb:UpdateItem
    status: int


_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d+/[^/]+/([^/]+)/")


def _s3_action(method: str, path: str, query: dict[str, list[str]]) -> str:
    """The IAM action an S3 REST request (path style) needs."""
    bucket_and_key = path.lstrip("/").split("/", 1)
    has_key = len(bucket_and_key) == 2 and bucket_and_key[1] != ""
    if not has_key:
        if method == "POST" and "delete" in query:
            return "s3:DeleteObject"  # DeleteObjects is authorised per object as s3:DeleteObject
        return "s3:ListBucket" if method in ("GET", "HEAD") else f"s3:{method}Bucket"
    return {"GET": "s3:GetObject", "HEAD": "s3:GetObject", "PUT": "s3:PutObject", "DELETE": "s3:DeleteObject"}.get(
        method, f"s3:{method}Object"
    )


# Operations AWS authorises through other actions: batches as their single-message action, transactions per item.
BATCH_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
TRANSACT_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def iam_actions(operation: str, body: bytes) -> tuple[str, ...]:
    """The IAM actions AWS evaluates for one call of `operation`."""
    if operation in ("dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"):
        items = json.loads(body or b"{}").get("TransactItems", [])
        return tuple(sorted({TRANSACT_ITEM_ACTIONS[kind] for item in items for kind in item}))
    return (BATCH_ACTIONS.get(operation, operation),)


def required_action(method: str, target: str, headers: Any, body: bytes) -> tuple[str, str]:
    """(access key id, API operation as service:Name) of a SigV4-signed request (header or presigned query)."""
    split = urlsplit(target)
    query = parse_qs(split.query, keep_blank_values=True)
    auth = headers.get("Authorization", "")
    match = _CREDENTIAL.search(auth)
    if match:
        key, service = match.group(1), match.group(2)
    elif "X-Amz-Credential" in query:
        parts = unquote(query["X-Amz-Credential"][0]).split("/")
        key, service = parts[0], parts[3]
    else:
        return "anonymous", f"{method} {split.path}"
    if service == "s3":
        return key, _s3_action(method, unquote(split.path), query)
    amz_target = headers.get("X-Amz-Target")
    if amz_target:
        return key, f"{service}:{amz_target.rsplit('.', 1)[-1]}"
    form = parse_qs(body.decode(errors="replace")) if body else {}
    action = (form.get("Action") or query.get("Action") or ["?"])[0]
    return key, f"{service}:{action}"


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the proxy records calls itself."""

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self) -> None:
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "content-length")}
        if body or self.command in ("POST", "PUT"):
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
        finally:
            upstream.close()
        key, operation = required_action(self.command, self.path, self.headers, body)
        self.server.record(Call(key, operation, iam_actions(operation, body), response.status))
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection", "server", "date"):
                self.send_header(name, value)
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(payload)))  # HEAD: the object's length
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class _ProxyServer(LoopbackServer):
    upstream_port: int
    record: Any


class RecordingProxy(Loopback):
    """A loopback reverse proxy in front of moto (`upstream_port`) that records every signed call."""

    def __init__(self, upstream_port: int) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        server.upstream_port = upstream_port
        server.record = self._record
        super().__init__(server, "aws-recorder", poll_s=0.05)
        self.url = self.origin
        self.start()

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def actions_by_key(self) -> dict[str, set[str]]:
        with self._lock:
            found: dict[str, set[str]] = defaultdict(set)
            for call in self.calls:
                found[call.access_key].update(call.actions)
            return dict(found)

    def denied(self) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.status == 403]
