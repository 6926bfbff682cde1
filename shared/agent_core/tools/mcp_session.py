"""One MCP client connection owned by a dedicated asyncio task (see agent_core.tools.mcp for why).

The `mcp` package is imported only inside the functions that connect, so importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from agent_core.observability import logger
from agent_core.tools.mcp_config import McpServerConfig

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as RemoteTool

Opener = Callable[[], AbstractAsyncContextManager["Client"]]

MAX_TOOL_PAGES = 20
CLOSE_TIMEOUT_S = 5.0


def describe(exc: BaseException) -> str:
    """A short, one-line reason: the leaf exceptions of a group, `Type: message` each."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, TimeoutError) and not text:
        text = "timed out"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@asynccontextmanager
async def open_client(config: McpServerConfig, connect_timeout_s: float) -> AsyncIterator[Client]:
    """An initialised `mcp.Client` for a resolved config (streamable HTTP with headers, or stdio)."""
    from mcp import Client, StdioServerParameters

    async with AsyncExitStack() as stack:
        if config.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            timeout = httpx2.Timeout(30.0, connect=connect_timeout_s, read=300.0)
            http = create_mcp_http_client(headers=dict(config.headers), timeout=timeout)
            await stack.enter_async_context(http)
            target: Any = streamable_http_client(config.url, http_client=http)
        else:
            assert config.command is not None
            target = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env))
        client = await stack.enter_async_context(Client(target))
        yield client


async def list_remote_tools(client: Client) -> list[RemoteTool]:
    """Every tool the server lists, following pagination cursors (bounded)."""
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def result_value(result: CallToolResult) -> Any:
    """The model-facing value of an ok result: structured content, else joined text, else content dicts."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = list(result.content)
    if blocks and all(block.type == "text" for block in blocks):
        return "\n".join(str(getattr(block, "text", "")) for block in blocks)
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


def error_text(result: CallToolResult) -> str:
    """The text of an `is_error` result (what the server says went wrong)."""
    texts = [str(getattr(block, "text", "")) for block in result.content if block.type == "text"]
    return "\n".join(text for text in texts if text) or "the MCP tool reported an error"


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failed connection's exception as seen (every waiter re-raises it anyway)."""
    if not future.cancelled():
        future.exception()


class McpConnection:
    """A lazily opened client for one server, entered and exited by its own task, shared by any task of the run."""

    def __init__(self, name: str, opener: Opener, connect_timeout_s: float) -> None:
        self.name = name
        self._opener = opener
        self.connect_timeout_s = connect_timeout_s
        self._ready: asyncio.Future[Client] | None = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def client(self) -> Client:
        """The connected client; the first caller starts the owner task, every caller waits for the same outcome."""
        if self._ready is None:
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._ready.add_done_callback(_retrieve)
            self._stop = asyncio.Event()
            self._owner = asyncio.create_task(self._own(), name=f"mcp-connection:{self.name}")
            self._timer = loop.call_later(self.connect_timeout_s, self._connect_timed_out)
        # Shielded: a caller timing out must not cancel the connection other callers share.
        return await asyncio.shield(self._ready)

    def _connect_timed_out(self) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(TimeoutError(f"no connection within {self.connect_timeout_s:g} s"))
            if self._owner is not None:
                self._owner.cancel()  # unwinds the half-open client inside its own task

    async def _own(self) -> None:
        assert self._ready is not None and self._stop is not None
        try:
            async with self._opener() as client:
                if self._timer is not None:
                    self._timer.cancel()
                if self._ready.done():  # timed out just as it connected
                    return
                self._ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("connection cancelled"))
            raise
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                logger.warning("MCP connection ended", extra={"mcpServer": self.name, "error": describe(exc)})
        finally:
            if self._timer is not None:
                self._timer.cancel()
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("connection closed"))

    async def aclose(self) -> None:
        """Ask the owner task to exit its client context and wait for it (cancelling it if it hangs)."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        if self._stop is not None:
            self._stop.set()
        done, _ = await asyncio.wait({owner}, timeout=CLOSE_TIMEOUT_S)
        if not done:
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner
            return
        if not owner.cancelled() and owner.exception() is not None:
            logger.warning("MCP connection close failed", extra={"mcpServer": self.name})
