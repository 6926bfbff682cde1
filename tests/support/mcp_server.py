"""A real MCP server (mcp's MCPServer) over streamable HTTP on a loopback port, in a background thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tests.support.server import free_port


@dataclass
class McpProbe:
    """What the server saw: requests per JSON-RPC method, request headers, peak concurrent `add` calls."""

    methods: Counter[str] = field(default_factory=Counter)
    headers: list[dict[str, str]] = field(default_factory=list)
    add_in_flight: int = 0
    add_peak: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def connections(self) -> int:
        """Client connections opened: one `server/discover` (2026 era) or `initialize` (handshake era) each."""
        return self.methods["server/discover"] + self.methods["initialize"]


def build_server(probe: McpProbe, add_delay_s: float = 0.0) -> MCPServer[Any]:
    """`add(a, b)` (optionally slow, to show overlap) and `fail()` (an isError result)."""
    server: MCPServer[Any] = MCPServer("calc", log_level="WARNING")

    async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        with probe._lock:
            probe.methods[ctx.method] += 1
        return await call_next(ctx)

    server.middleware.append(count)

    @server.tool(description="Add two integers.")
    async def add(a: int, b: int) -> int:
        with probe._lock:
            probe.add_in_flight += 1
            probe.add_peak = max(probe.add_peak, probe.add_in_flight)
        try:
            await asyncio.sleep(add_delay_s)
            return a + b
        finally:
            with probe._lock:
                probe.add_in_flight -= 1

    @server.tool(description="Always fails.")
    def fail() -> str:
        raise ToolError("this tool always fails")

    return server


class _HeaderProbe:
    """ASGI wrapper recording each HTTP request's headers (to see what the client sent)."""

    def __init__(self, app: Any, probe: McpProbe) -> None:
        self.app = app
        self.probe = probe

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.probe.headers.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@contextmanager
def mcp_http_server(add_delay_s: float = 0.0) -> Iterator[tuple[str, McpProbe]]:
    """Yield the `/mcp` endpoint URL and the probe while uvicorn serves the MCP app; stop it afterwards."""
    probe = McpProbe()
    app = _HeaderProbe(build_server(probe, add_delay_s).streamable_http_app(), probe)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:  # bounded wait for the socket (the app's lifespan starts the session manager first)
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the MCP test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp", probe
    finally:
        server.should_exit = True
        thread.join(timeout=10)
