"""Serve an ASGI app with uvicorn on a loopback port in a background thread (real HTTP, real streaming)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from agent_core.cli import listen
from tests.support.wait import poll_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Any, server: uvicorn.Server | None = None) -> Iterator[str]:
    """Yield the base URL while uvicorn serves `app` (or runs `server`); stop it afterwards.

    uvicorn is handed a socket already bound to a free port, so no other process (a parallel test worker)
    can take the port between choosing it and listening on it; `agent-core serve`'s own socket (TCP_NODELAY
    on every connection, as deployed behind the web adapter).
    """
    sock = listen("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    if server is None:
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    poll_until(lambda: server.started or not thread.is_alive(), "the test server started")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
