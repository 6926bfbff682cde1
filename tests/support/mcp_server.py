"""A real MCP server (mcp's MCPServer) over streamable HTTP on a loopback port, in a background thread."""

from __future__ import annotations

import asyncio
import threading
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
from tests.support.wait import poll_until


@dataclass
class McpProbe:
    """What the server saw: requests per JSON-RPC method, request headers, peak concurrent `add` calls."""

    methods: Counter[str] = field(default_factory=Counter)
    headers: list[dict[str, str]] = field(default_factory=list)
    add_in_flight: int = 0
    add_peak: int = 0
    add_overlap: int = 1  # `add` answers once this many calls have been in flight together
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def connections(self) -> int:
        """Client connections opened: one `server/discover` (2026 era) or `initialize` (handshake era) each."""
        return self.methods["server/discover"] + self.methods["initialize"]


def build_server(probe: McpProbe) -> MCPServer[Any]:
    """`add(a, b)` (answering once `probe.add_overlap` calls are in flight, to show overlap) and `fail()` (an
    isError result)."""
    server: MCPServer[Any] = MCPServer("calc", log_level="WARNING")

    async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        with probe._lock:
            probe.methods[ctx.method] += 1
        return await call_next(ctx)

    server.middleware.append(count)

    overlapped = asyncio.Condition()

    @server.tool(description="Add two integers.")
    async def add(a: int, b: int) -> int:
        # Each call answers once `probe.add_overlap` calls have been in flight together (a bounded wait: calls
        # that never overlap get an error naming it, never a hang)
        async with overlapped:
            with probe._lock:
                probe.add_in_flight += 1
                probe.add_peak = max(probe.add_peak, probe.add_in_flight)
            overlapped.notify_all()
            try:
                await asyncio.wait_for(overlapped.wait_for(lambda: probe.add_peak >= probe.add_overlap), 30)
            except TimeoutError:
                raise ToolError(f"add calls did not overlap {probe.add_overlap} at a time") from None
            finally:
                with probe._lock:
                    probe.add_in_flight -= 1
        return a + b

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
def mcp_http_server() -> Iterator[tuple[str, McpProbe]]:
    """Yield the `/mcp` endpoint URL and the probe while uvicorn serves the MCP app; stop it afterwards."""
    probe = McpProbe()
    app = _HeaderProbe(build_server(probe).streamable_http_app(), probe)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    # The socket opens once the app's lifespan has started the session manager
    poll_until(lambda: server.started or not thread.is_alive(), "the MCP test server started", bound_s=10)
    if not server.started:
        raise RuntimeError("the MCP test server did not start")
    try:
        yield f"http://127.0.0.1:{port}/mcp", probe
    finally:
        server.should_exit = True
        thread.join(timeout=10)
