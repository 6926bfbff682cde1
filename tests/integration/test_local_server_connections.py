"""The local server's connections: TCP_NODELAY on every accepted socket, slow bodies answered 408 and closed,
silent or half-sent request heads and idle keep-alive connections closed. Real sockets against uvicorn as `agent-core serve` configures it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.cli import http_server, listen
from agent_core.context import build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.local_server import local_server
from tests.support.server import serve

WAIT_S = 30  # a generous bound on any wait below: never a timing assertion


def _address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def _read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = conn.recv(65536)
        assert chunk
        body += chunk
    return int(status_line.split()[1]), headers, body


def _closed_by_server(conn: socket.socket) -> bool:
    """True when the server closed the connection (EOF, or a reset), waiting at most WAIT_S."""
    conn.settimeout(WAIT_S)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_socket_from_listen_hands_uvicorn_tcp_nodelay_connections() -> None:
    settings = make_settings(AGENT_KEEP_ALIVE_TIMEOUT_S=7)
    app = build_app(*routes.chat, context=build_context(settings, table=MemoryTable()))
    server = http_server(app, settings)
    assert server.config.timeout_keep_alive == 7
    with serve(app, server) as base, socket.create_connection(_address(base), timeout=WAIT_S) as client:
        client.sendall(b"GET /api/ap/agents HTTP/1.1\r\nHost: t\r\n\r\n")
        assert _read_response(client)[0] == 200  # auth mode "none": a request without credentials is answered
        accepted = [c.transport.get_extra_info("socket") for c in server.server_state.connections]
        assert len(accepted) == 1
        assert accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_listen_creates_a_tcp_socket() -> None:
    with listen("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP  # what asyncio checks before setting TCP_NODELAY


@pytest.fixture(scope="module")
def short_timeouts() -> Iterator[str]:
    """`agent-core serve` with a 1 s body read timeout and a 1 s keep-alive."""
    with local_server(AGENT_BODY_READ_TIMEOUT_S="1", AGENT_KEEP_ALIVE_TIMEOUT_S="1") as (base, _):
        yield base


def _post(path: str, body: bytes, *, length: int | None = None) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nX-User-Id: slow\r\n"
    return f"{head}Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


def test_a_body_trickled_byte_by_byte_gets_408_and_the_connection_closes(short_timeouts: str) -> None:
    body = json.dumps({"title": "slow"}).encode()
    with socket.create_connection(_address(short_timeouts), timeout=WAIT_S) as conn:
        conn.sendall(_post("/api/v1/conversations", b"", length=len(body)))
        conn.sendall(body[:1])  # then nothing more: the body never completes
        status, headers, payload = _read_response(conn)
        assert status == 408
        assert headers["content-type"] == "application/json" and headers["connection"] == "close"
        assert json.loads(payload)["error"]["code"] == "request_timeout"
        assert _closed_by_server(conn)


def test_a_whole_body_is_still_served_after_a_timed_out_one(short_timeouts: str) -> None:
    with socket.create_connection(_address(short_timeouts), timeout=WAIT_S) as conn:
        conn.sendall(_post("/api/v1/conversations", json.dumps({"title": "fine"}).encode()))
        status, _, payload = _read_response(conn)
    assert status == 201 and json.loads(payload)["conversationId"]


@pytest.mark.parametrize("head", [b"", b"GET /api/ap/agents HT"], ids=["nothing", "half a head"])
def test_a_connection_without_a_whole_request_head_is_closed(short_timeouts: str, head: bytes) -> None:
    with socket.create_connection(_address(short_timeouts), timeout=WAIT_S) as conn:
        conn.sendall(head)
        assert _closed_by_server(conn)


def test_an_idle_keep_alive_connection_is_closed(short_timeouts: str) -> None:
    with socket.create_connection(_address(short_timeouts), timeout=WAIT_S) as conn:
        conn.sendall(b"GET /api/ap/agents HTTP/1.1\r\nHost: t\r\n\r\n")
        status, headers, _ = _read_response(conn)
        assert status == 200 and headers.get("connection") != "close"  # kept alive, then left idle
        assert _closed_by_server(conn)
