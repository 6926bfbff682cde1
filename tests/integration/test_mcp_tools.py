"""MCP tools against real servers: MCPServer over streamable HTTP on loopback, mcp-server-time over stdio."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_core.config import Settings
from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.tools.base import Tool, ToolContext, ToolFailure
from agent_core.tools.mcp import TOOL_NAME, McpCatalog, McpSecretError, mcp_tool_name, resolve_secrets
from agent_core.tools.mcp_config import McpServerConfig
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService
from tests.support.fixtures import make_settings
from tests.support.mcp_server import McpProbe, mcp_http_server
from tests.support.server import free_port

SHARED = Path(__file__).resolve().parents[2] / "shared"


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def catalog(settings: Settings, clock: FakeClock) -> McpCatalog:
    return McpCatalog(settings, env={}, clock=clock)


@pytest.fixture
def calc() -> Iterator[tuple[str, McpProbe]]:
    with mcp_http_server() as served:
        yield served


def tool_ctx(settings: Settings) -> ToolContext:
    return ToolContext("req", "conv", "user", settings, "UTC", datetime.now(UTC))


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def dead_url() -> tuple[str, int]:
    port = free_port()  # bound and released: nothing listens there
    return f"http://127.0.0.1:{port}/mcp", port


def test_importing_the_module_does_not_import_mcp() -> None:
    code = (
        "import sys, agent_core.tools.mcp;"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types', 'httpx2'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=SHARED)
    assert out.stdout.strip() == "[]"


async def test_http_discovery_declares_tools_and_caches_them_for_the_ttl(
    catalog: McpCatalog, clock: FakeClock, calc: tuple[str, McpProbe]
) -> None:
    url, probe = calc
    config = McpServerConfig(name="calc", url=url)
    async with catalog.run([config]) as run:
        tools, warnings = await run.tools()
    assert warnings == []
    found = by_name(tools)
    assert set(found) == {"calc__add", "calc__fail"}
    add = found["calc__add"]
    assert add.kind == "mcp"
    assert add.permissions == frozenset({"mcp:calc"})
    assert add.description == "Add two integers."
    params = add.schema()["function"]["parameters"]
    assert params["type"] == "object"
    assert set(params["properties"]) == {"a", "b"}
    assert params["required"] == ["a", "b"]
    assert probe.methods["tools/list"] == 1
    assert probe.connections == 1

    clock.now += 299  # within the TTL: no connection, no listing
    async with catalog.run([config]) as run:
        tools_again, _ = await run.tools()
    assert sorted(t.name for t in tools_again) == ["calc__add", "calc__fail"]
    assert probe.methods["tools/list"] == 1
    assert probe.connections == 1

    clock.now += 2  # past the TTL: listed again
    async with catalog.run([config]) as run:
        await run.tools()
    assert probe.methods["tools/list"] == 2
    assert probe.connections == 2


async def test_calls_reuse_the_discovery_session_and_fail_is_a_tool_failure(
    catalog: McpCatalog, settings: Settings, calc: tuple[str, McpProbe]
) -> None:
    url, probe = calc
    async with catalog.run([McpServerConfig(name="calc", url=url)]) as run:
        found = by_name((await run.tools())[0])
        ctx = tool_ctx(settings)
        assert await found["calc__add"].run(found["calc__add"].parse_args({"a": 2, "b": 3}), ctx) == {"result": 5}
        with pytest.raises(ToolFailure) as failure:
            await found["calc__fail"].run({}, ctx)
        assert (failure.value.status, failure.value.reason) == ("error", "mcp_error")
        assert "always fails" in failure.value.message
        with pytest.raises(ValueError, match="missing required"):
            found["calc__add"].parse_args({"a": 1})
    assert probe.connections == 1
    assert probe.methods["tools/call"] == 2


async def test_governed_execution_through_the_tool_service(
    catalog: McpCatalog, settings: Settings, calc: tuple[str, McpProbe]
) -> None:
    url, _ = calc
    audit: list[dict[str, Any]] = []
    async with catalog.run([McpServerConfig(name="calc", url=url)]) as run:
        tools, _ = await run.tools()
        service = ToolService(ToolRegistry(tools), settings, audit=audit.append)
        ctx = tool_ctx(settings)
        ok = await service.execute(ToolCall(id="c1", name="calc__add", arguments='{"a": 1, "b": 2}'), ctx)
        bad = await service.execute(ToolCall(id="c2", name="calc__fail", arguments="{}"), ctx)
    assert (ok.status, ok.output) == (ToolStatus.OK, {"result": 3})
    assert audit[0]["toolKind"] == "mcp", "the audit line names the kind of tool that ran"
    assert (bad.status, bad.reason) == (ToolStatus.ERROR, "mcp_error")
    assert [line["status"] for line in audit] == ["ok", "error"]


async def test_parallel_calls_from_two_tasks_share_one_lazily_opened_session(
    catalog: McpCatalog, settings: Settings, calc: tuple[str, McpProbe]
) -> None:
    url, probe = calc
    config = McpServerConfig(name="calc", url=url)
    async with catalog.run([config]) as run:
        await run.tools()
    assert probe.connections == 1

    async with catalog.run([config]) as run:  # cache hit: no session until the first call
        add = by_name((await run.tools())[0])["calc__add"]
        assert probe.connections == 1
        ctx = tool_ctx(settings)
        probe.add_overlap = 2  # each call answers only once both are in flight together
        first = asyncio.create_task(add.run({"a": 1, "b": 2}, ctx))
        second = asyncio.create_task(add.run({"a": 10, "b": 20}, ctx))
        assert await asyncio.gather(first, second) == [{"result": 3}, {"result": 30}]
        assert await add.run({"a": 0, "b": 0}, ctx) == {"result": 0}
    assert probe.connections == 2  # one for the first run's discovery, one shared by this run's three calls
    assert probe.add_peak == 2  # both tasks' calls were in flight together over that one session


async def test_stdio_time_server(catalog: McpCatalog, settings: Settings) -> None:
    config = McpServerConfig(
        name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
    )
    async with catalog.run([config]) as run:
        tools, warnings = await run.tools()
        assert warnings == []
        found = by_name(tools)
        assert {"time__get_current_time", "time__convert_time"} <= set(found)
        now = found["time__get_current_time"]
        assert now.permissions == frozenset({"mcp:time"})
        assert "timezone" in now.parameters()["properties"]
        result = await now.run({"timezone": "Asia/Tokyo"}, tool_ctx(settings))
    assert result["timezone"] == "Asia/Tokyo"
    assert result["datetime"].endswith("+09:00")


async def test_dead_server_warns_then_is_skipped_without_connecting_during_the_cooldown(
    catalog: McpCatalog, clock: FakeClock, calc: tuple[str, McpProbe]
) -> None:
    url, _ = calc
    dead, port = dead_url()
    servers = [McpServerConfig(name="dead", url=dead), McpServerConfig(name="calc", url=url)]
    async with catalog.run(servers) as run:
        tools, warnings = await run.tools()
    assert sorted(t.name for t in tools) == ["calc__add", "calc__fail"]
    assert len(warnings) == 1
    code, message = warnings[0]
    assert code == "mcp_unavailable"
    assert message.startswith("MCP server dead unavailable: ")
    assert "ConnectError" in message

    with socket.create_server(("127.0.0.1", port)) as listener:  # something now listens: it must not be tried
        listener.setblocking(False)
        clock.now += 59
        started = time.perf_counter()
        async with catalog.run(servers) as run:
            tools, warnings = await run.tools()
        assert time.perf_counter() - started < 1.0
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection attempt reached the port
    assert sorted(t.name for t in tools) == ["calc__add", "calc__fail"]
    assert warnings[0][0] == "mcp_unavailable"
    assert warnings[0][1].startswith("MCP server dead unavailable: skipped without connecting")

    clock.now += 2  # the cool-down is over: tried again (and still dead)
    async with catalog.run(servers[:1]) as run:
        _, warnings = await run.tools()
    assert "ConnectError" in warnings[0][1]


async def test_a_call_that_cannot_connect_is_unavailable_and_starts_a_cooldown(
    settings: Settings, clock: FakeClock
) -> None:
    catalog = McpCatalog(settings, clock=clock)
    with mcp_http_server() as (url, _):
        config = McpServerConfig(name="calc", url=url)
        async with catalog.run([config]) as run:
            await run.tools()
    async with catalog.run([config]) as run:  # listing cached, server gone
        add = by_name((await run.tools())[0])["calc__add"]
        with pytest.raises(ToolFailure) as failure:
            await add.run({"a": 1, "b": 2}, tool_ctx(settings))
        assert (failure.value.status, failure.value.reason) == ("error", "mcp_unavailable")
        assert failure.value.message.startswith("MCP server calc unavailable: ")
    async with catalog.run([config]) as run:
        tools, warnings = await run.tools()
    assert tools == []
    assert "skipped without connecting" in warnings[0][1]


async def test_connect_timeout_gives_up_on_a_server_that_never_answers(settings: Settings) -> None:
    catalog = McpCatalog(settings, connect_timeout_s=0.3)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts TCP (backlog), never speaks HTTP
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        started = time.perf_counter()
        async with catalog.run([McpServerConfig(name="silent", url=url)]) as run:
            tools, warnings = await run.tools()
        elapsed = time.perf_counter() - started
    assert tools == []
    assert warnings == [("mcp_unavailable", "MCP server silent unavailable: TimeoutError: no connection within 0.3 s")]
    assert elapsed < 3.0


async def test_secret_placeholder_in_a_header_is_resolved_from_the_injected_env(
    settings: Settings, calc: tuple[str, McpProbe]
) -> None:
    url, probe = calc
    catalog = McpCatalog(settings, env={"CALC_TOKEN": "s3cret"})
    config = McpServerConfig(name="calc", url=url, headers={"Authorization": "Bearer ${secret:CALC_TOKEN}"})
    async with catalog.run([config]) as run:
        tools, warnings = await run.tools()
    assert warnings == [] and tools
    assert probe.headers and all(h.get("authorization") == "Bearer s3cret" for h in probe.headers)


async def test_a_missing_secret_is_an_error_naming_the_server_and_the_secret(
    settings: Settings, calc: tuple[str, McpProbe]
) -> None:
    with pytest.raises(McpSecretError, match=r"MCP server calc: secret 'NOPE' is not set"):
        resolve_secrets("Bearer ${secret:NOPE}", settings, {}, server="calc")
    assert resolve_secrets("a ${secret:X} b ${secret:Y}", settings, {"X": "1", "Y": "2"}) == "a 1 b 2"

    url, probe = calc
    config = McpServerConfig(name="calc", url=url, headers={"Authorization": "Bearer ${secret:NOPE}"})
    async with McpCatalog(settings, env={}).run([config]) as run:
        tools, warnings = await run.tools()
    assert tools == []
    assert warnings == [("mcp_unavailable", "MCP server calc unavailable: secret 'NOPE' is not available")]
    assert probe.headers == []  # nothing was sent without the secret


def test_secrets_come_from_secrets_manager_in_lambda(aws_env: None) -> None:
    import boto3

    boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name="calc-token", SecretString="from-sm")
    lambda_settings = make_settings(AWS_LAMBDA_FUNCTION_NAME="agent-fn")
    env = {"calc-token": "from-env"}  # ignored in Lambda
    assert resolve_secrets("Bearer ${secret:calc-token}", lambda_settings, env) == "Bearer from-sm"
    with pytest.raises(McpSecretError, match="secret 'missing' cannot be read"):
        resolve_secrets("${secret:missing}", lambda_settings, env, server="calc")


def test_tool_names_are_sanitised_and_long_names_truncated_deterministically() -> None:
    assert mcp_tool_name("calc", "add") == "calc__add"
    assert mcp_tool_name("calc", "get.time/now") == "calc__get_time_now"
    long = mcp_tool_name("server", "x" * 100)
    assert len(long) == 64 and TOOL_NAME.match(long)
    assert long == mcp_tool_name("server", "x" * 100)
    assert long != mcp_tool_name("server", "x" * 101)
    hashed = mcp_tool_name("calc", "get_time_now", hashed=True)
    assert TOOL_NAME.match(hashed) and hashed != "calc__get_time_now"
