"""MCP tools: a process-wide catalog of servers' tools (TTL cache, cool-down) and per-run sessions.

`McpCatalog` (one per app context) remembers each server's tool listing for `ttl_s` and puts a server that
failed (connect timeout, refused, protocol error, missing secret) in a cool-down of `cooldown_s`, during
which it is skipped without a connection attempt. It holds no asyncio objects, so it survives event loops.

`McpRun` (one per agent run) returns the agent's MCP tools plus warnings, connects to a server lazily (for
discovery on a cache miss, else on the first call), reuses that connection for the rest of the run, and
closes everything in `aclose()`.

Concurrency design: an `mcp.Client` enters anyio task groups, whose cancel scopes must be entered and exited
by the same task. The runtime runs tool calls in parallel with `asyncio.create_task`, so the first call to a
server may come from a short-lived task that cannot own the session. Each connection is therefore owned by a
dedicated background task (`McpConnection`): it enters the client, publishes it through a future, waits
for `aclose()` and exits the client itself. Callers in any task of the run send requests over the shared
session directly (its memory streams are task-agnostic; only its task groups are task-bound), so parallel
calls are multiplexed over one session. A connect timeout cancels the owner task, which unwinds the
half-open client in the task that opened it.

`mcp` is imported lazily (in agent_core.tools.mcp_session), only when an agent has MCP servers.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from agent_core.config import Settings
from agent_core.observability import logger
from agent_core.tools.base import Tool, ToolContext, ToolFailure, ToolKind
from agent_core.tools.mcp_config import McpServerConfig
from agent_core.tools.mcp_secrets import McpSecretError, resolve_secrets, resolve_server
from agent_core.tools.mcp_session import (
    McpConnection,
    Opener,
    describe,
    error_text,
    list_remote_tools,
    open_client,
    result_value,
)

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import Tool as RemoteTool

__all__ = ["McpCatalog", "McpRun", "McpSecretError", "McpTool", "McpToolSpec", "mcp_tool_name", "resolve_secrets"]

McpWarning = tuple[str, str]  # (code, message)
UNAVAILABLE = "mcp_unavailable"

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64


def mcp_tool_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """`{server}__{tool}` made safe for the model (`^[a-zA-Z0-9_-]{1,64}$`); long names end in a stable hash."""
    raw = f"{server}__{tool}"
    clean = _UNSAFE.sub("_", raw)
    if len(clean) <= _MAX_NAME and not hashed:
        return clean
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:8]
    return f"{clean[: _MAX_NAME - 9]}_{digest}"


class _SchemaArgs(BaseModel):
    """Placeholder model: MCP tools validate against their inputSchema's shape in parse_args."""


class McpTool(Tool):
    """A tool of an MCP server, bound to the run whose session it calls through."""

    kind: ClassVar[ToolKind] = "mcp"
    args_model: ClassVar[type[BaseModel]] = _SchemaArgs
    server: ClassVar[str]
    remote_name: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]

    def __init__(self, run: McpRun) -> None:
        self._run = run

    def parse_args(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        missing = [key for key in self.input_schema.get("required", []) if key not in value]
        if missing:
            raise ValueError(f"missing required arguments: {missing}")
        return value

    def parameters(self) -> dict[str, Any]:
        return self.input_schema

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        return await self._run.call(self.server, self.remote_name, dict(args))


@dataclass(frozen=True)
class McpToolSpec:
    """One discovered tool: where it lives and the Tool class declaring it (instantiated per run)."""

    server: str
    remote_name: str
    name: str
    tool_class: type[McpTool]


def _tool_class(server: str, remote: RemoteTool, name: str) -> type[McpTool]:
    schema = copy.deepcopy(dict(remote.input_schema or {}))
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    description = remote.description or getattr(remote, "title", None) or f"{remote.name} (MCP server {server})"
    attrs = {
        "name": name,
        "description": description,
        "permissions": frozenset({f"mcp:{server}"}),
        "server": server,
        "remote_name": remote.name,
        "input_schema": schema,
    }
    return type(f"Mcp_{name}", (McpTool,), attrs)


@dataclass(frozen=True)
class _Listing:
    specs: tuple[McpToolSpec, ...]
    expires: float


@dataclass(frozen=True)
class _Cooldown:
    until: float
    reason: str


def _reason(exc: BaseException) -> str:
    if isinstance(exc, McpSecretError):
        return f"secret {exc.secret!r} is not available"
    return describe(exc)


class McpCatalog:
    """Process-wide: tool listings per server (TTL) and failing servers' cool-downs; `run()` starts a run."""

    def __init__(
        self,
        settings: Settings,
        env: Mapping[str, str] | None = None,
        *,
        ttl_s: float = 300.0,
        cooldown_s: float = 60.0,
        connect_timeout_s: float = 2.0,
        stdio_connect_timeout_s: float = 10.0,
        list_timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.env: Mapping[str, str] = env if env is not None else {}
        self.ttl_s = ttl_s
        self.cooldown_s = cooldown_s
        self.connect_timeout_s = connect_timeout_s
        self.stdio_connect_timeout_s = stdio_connect_timeout_s
        self.list_timeout_s = list_timeout_s
        self.clock = clock
        self._listings: dict[str, _Listing] = {}
        self._cooldowns: dict[str, _Cooldown] = {}

    def run(self, servers: Sequence[McpServerConfig]) -> McpRun:
        """A run over the agent's servers; close it with `await run.aclose()` (or `async with`)."""
        return McpRun(self, servers)

    @staticmethod
    def key(config: McpServerConfig) -> str:
        """Cache key: the declaration as written (placeholders unresolved, so no secret values)."""
        return config.model_dump_json()

    def connect_timeout(self, config: McpServerConfig) -> float:
        """Starting a stdio server's interpreter takes longer than opening a socket."""
        return self.connect_timeout_s if config.transport == "http" else self.stdio_connect_timeout_s

    def listing(self, config: McpServerConfig) -> tuple[McpToolSpec, ...] | None:
        """The cached tool specs while fresh, else None."""
        entry = self._listings.get(self.key(config))
        if entry is None or entry.expires <= self.clock():
            return None
        return entry.specs

    def remember(self, config: McpServerConfig, remote_tools: Sequence[RemoteTool]) -> tuple[McpToolSpec, ...]:
        """Cache a fresh listing; names colliding after sanitising get the hashed form."""
        specs: list[McpToolSpec] = []
        taken: set[str] = set()
        for remote in remote_tools:
            name = mcp_tool_name(config.name, remote.name)
            if name in taken:
                name = mcp_tool_name(config.name, remote.name, hashed=True)
            if name in taken:
                continue
            taken.add(name)
            specs.append(McpToolSpec(config.name, remote.name, name, _tool_class(config.name, remote, name)))
        listing = tuple(specs)
        key = self.key(config)
        self._listings[key] = _Listing(listing, self.clock() + self.ttl_s)
        self._cooldowns.pop(key, None)
        return listing

    def cooling(self, config: McpServerConfig) -> str | None:
        """The skip warning's message while the server is in cool-down, else None."""
        entry = self._cooldowns.get(self.key(config))
        if entry is None:
            return None
        remaining = entry.until - self.clock()
        if remaining <= 0:
            return None
        return (
            f"MCP server {config.name} unavailable: skipped without connecting for {remaining:.0f} s more "
            f"after a failure ({entry.reason})"
        )

    def fail(self, config: McpServerConfig, exc: BaseException) -> str:
        """Start (not extend) the server's cool-down; the warning's message."""
        reason = _reason(exc)
        key = self.key(config)
        now = self.clock()
        current = self._cooldowns.get(key)
        if current is None or current.until <= now:
            self._cooldowns[key] = _Cooldown(now + self.cooldown_s, reason)
            logger.warning("MCP server unavailable", extra={"mcpServer": config.name, "error": reason})
        return f"MCP server {config.name} unavailable: {reason}"

    async def resolve(self, config: McpServerConfig) -> McpServerConfig:
        """`config` with `${secret:NAME}` resolved (Secrets Manager off the event loop in Lambda)."""
        if self.settings.in_lambda:
            return await asyncio.to_thread(resolve_server, config, self.settings, self.env)
        return resolve_server(config, self.settings, self.env)


class McpRun:
    """One agent run's MCP tools and sessions: `tools()` first, tools' `run()` during, `aclose()` at the end."""

    def __init__(self, catalog: McpCatalog, servers: Sequence[McpServerConfig]) -> None:
        self.catalog = catalog
        self.servers: dict[str, McpServerConfig] = {}
        for config in servers:
            if config.name in self.servers:
                logger.warning("duplicate MCP server name ignored", extra={"mcpServer": config.name})
                continue
            self.servers[config.name] = config
        self._connections: dict[str, McpConnection] = {}
        self._closed = False

    async def tools(self) -> tuple[list[Tool], list[McpWarning]]:
        """The agent's MCP tools (discovered concurrently per server) and a warning per unavailable server."""
        found = await asyncio.gather(*(self._discover(config) for config in self.servers.values()))
        tools: list[Tool] = []
        warnings: list[McpWarning] = []
        for specs, warning in found:
            tools.extend(spec.tool_class(self) for spec in specs)
            if warning is not None:
                warnings.append(warning)
        return tools, warnings

    async def _discover(self, config: McpServerConfig) -> tuple[tuple[McpToolSpec, ...], McpWarning | None]:
        skipped = self.catalog.cooling(config)
        if skipped is not None:
            return (), (UNAVAILABLE, skipped)
        cached = self.catalog.listing(config)
        if cached is not None:
            return cached, None
        try:
            client = await self._client(config)
            async with asyncio.timeout(self.catalog.list_timeout_s):
                remote = await list_remote_tools(client)
        except Exception as exc:
            return (), (UNAVAILABLE, self.catalog.fail(config, exc))
        return self.catalog.remember(config, remote), None

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Call `tool` on `server` over this run's session; failures become ToolFailure."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        config = self.servers.get(server)
        if config is None:
            raise ToolFailure("error", UNAVAILABLE, f"MCP server {server} is not declared for this agent")
        if server not in self._connections:
            skipped = self.catalog.cooling(config)
            if skipped is not None:
                raise ToolFailure("error", UNAVAILABLE, skipped)
        try:
            client = await self._client(config)
        except Exception as exc:
            raise ToolFailure("error", UNAVAILABLE, self.catalog.fail(config, exc)) from exc
        try:
            result = await client.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise ToolFailure("error", UNAVAILABLE, self.catalog.fail(config, exc)) from exc
            raise ToolFailure("error", "mcp_error", exc.error.message) from exc
        except (ValueError, RuntimeError) as exc:  # an invalid result, an unexpected result shape
            raise ToolFailure("error", "mcp_error", describe(exc)) from exc
        except Exception as exc:  # the transport broke under the session
            raise ToolFailure("error", UNAVAILABLE, self.catalog.fail(config, exc)) from exc
        if result.is_error:
            raise ToolFailure("error", "mcp_error", error_text(result))
        return result_value(result)

    async def _client(self, config: McpServerConfig) -> Client:
        """This run's client for the server: connected on first use, by a task that owns it until aclose()."""
        if self._closed:
            raise ConnectionError("the MCP run is closed")
        connection = self._connections.get(config.name)
        if connection is None:  # no await between the lookup and the insert: one connection per server
            connection = McpConnection(config.name, self._opener(config), self.catalog.connect_timeout(config))
            self._connections[config.name] = connection
        return await connection.client()

    def _opener(self, config: McpServerConfig) -> Opener:
        @asynccontextmanager
        async def open_resolved() -> AsyncIterator[Client]:
            resolved = await self.catalog.resolve(config)
            async with open_client(resolved, self.catalog.connect_timeout_s) as client:
                yield client

        return open_resolved

    async def aclose(self) -> None:
        """Close every session of this run (each in the task that opened it)."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(connection.aclose() for connection in connections), return_exceptions=True)

    async def __aenter__(self) -> McpRun:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
