"""ToolService: one test per governance check, each asserting the audit line."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stderr
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService
from tests.support.fixtures import make_settings


class EchoArgs(BaseModel):
    text: str


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."
    args_model = EchoArgs
    permissions = frozenset({"echo:use"})

    async def run(self, args: BaseModel, ctx: ToolContext) -> Any:
        assert isinstance(args, EchoArgs)
        return {"echo": args.text}


class SlowTool(EchoTool):
    name = "slow"
    permissions = frozenset()
    timeout_ms = 50

    async def run(self, args: BaseModel, ctx: ToolContext) -> Any:
        await asyncio.Event().wait()  # never set: only the timeout ends it


class BrokenTool(EchoTool):
    name = "broken"
    permissions = frozenset()

    async def run(self, args: BaseModel, ctx: ToolContext) -> Any:
        raise RuntimeError("secret internals")


def _service(audit: list[dict[str, Any]], **settings: Any) -> ToolService:
    registry = ToolRegistry([EchoTool(), SlowTool(), BrokenTool()])
    return ToolService(registry, make_settings(**settings), audit.append)


def _ctx(**settings: Any) -> ToolContext:
    return ToolContext(
        request_id="req-1",
        conversation_id="c_1",
        user_id="u1",
        settings=make_settings(**settings),
        timezone="UTC",
        now=datetime(2026, 1, 8, tzinfo=UTC),
    )


async def _run(name: str, arguments: str, **settings: Any) -> tuple[Any, dict[str, Any]]:
    audit: list[dict[str, Any]] = []
    execution = await _service(audit, **settings).execute(ToolCall(id="call_1", name=name, arguments=arguments), _ctx())
    assert len(audit) == 1, "exactly one audit line per call"
    line = audit[0]
    assert {"requestId", "conversationId", "toolName", "status", "reason", "durationMs"} <= set(line)
    assert line["requestId"] == "req-1" and line["conversationId"] == "c_1" and line["toolName"] == name
    assert line["status"] == execution.status.value and line["reason"] == execution.reason
    return execution, line


async def test_unregistered_tool_is_an_error_result() -> None:
    execution, _line = await _run("nope", "{}")
    assert (execution.status, execution.reason) == (ToolStatus.ERROR, "not_registered")
    assert json.loads(execution.model_content())["error"]["reason"] == "not_registered"


async def test_tool_outside_the_allow_list_is_denied() -> None:
    _execution, line = await _run("echo", '{"text": "hi"}', AGENT_TOOLS_ALLOWED="time,http_get")
    assert (line["status"], line["reason"]) == ("denied", "not_allowed")


async def test_missing_permission_is_denied() -> None:
    _execution, line = await _run("echo", '{"text": "hi"}', AGENT_PERMISSIONS_GRANTED="net:http")
    assert (line["status"], line["reason"]) == ("denied", "missing_permission")


async def test_granted_permission_runs() -> None:
    execution, line = await _run("echo", '{"text": "hi"}', AGENT_PERMISSIONS_GRANTED="echo:use")
    assert (line["status"], line["reason"]) == ("ok", "")
    assert execution.output == {"echo": "hi"}


async def test_input_over_the_limit_is_refused_before_running() -> None:
    _execution, line = await _run("echo", json.dumps({"text": "x" * 100}), AGENT_TOOL_MAX_INPUT_BYTES="50")
    assert (line["status"], line["reason"]) == ("error", "input_too_large")


@pytest.mark.parametrize("arguments", ['{"text": ', '{"other": 1}', "[1, 2]"])
async def test_invalid_argument_json_is_an_error_result(arguments: str) -> None:
    _execution, line = await _run("echo", arguments)
    assert (line["status"], line["reason"]) == ("error", "invalid_arguments")


async def test_slow_tool_times_out() -> None:
    _execution, line = await _run("slow", '{"text": "x"}')
    assert (line["status"], line["reason"]) == ("timeout", "timeout")


async def test_output_over_the_limit_is_refused() -> None:
    execution, line = await _run("echo", json.dumps({"text": "y" * 500}), AGENT_TOOL_MAX_OUTPUT_BYTES="100")
    assert (line["status"], line["reason"]) == ("error", "output_too_large")
    assert execution.output is None


async def test_exception_in_tool_is_an_error_result_without_internals() -> None:
    execution, line = await _run("broken", '{"text": "x"}')
    assert (line["status"], line["reason"]) == ("error", "tool_error")
    assert "secret internals" not in execution.model_content()


async def test_default_audit_sink_writes_one_tool_audit_json_line_to_stderr() -> None:
    # Given the service with its default sink
    service = ToolService(ToolRegistry([EchoTool()]), make_settings())
    buffer = io.StringIO()
    # When a call runs
    with redirect_stderr(buffer):
        await service.execute(ToolCall(id="call_9", name="echo", arguments='{"text":"a"}'), _ctx())
    # Then stderr has one JSON line from the TOOL_AUDIT logger
    lines = [json.loads(x) for x in buffer.getvalue().splitlines() if '"TOOL_AUDIT"' in x]
    assert len(lines) == 1
    assert lines[0]["logger"] == "TOOL_AUDIT" and lines[0]["toolName"] == "echo" and lines[0]["status"] == "ok"
