"""The UI wires' approval tests' pieces: the default agent gating the recording tool (`write_note`) in a context."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_core.context import AppContext
from agent_core.domain.models import Wait
from agent_core.runtime.agents import DEFAULT_AGENT, AgentCatalog, AgentDefinition
from tests.support.approvals import RecordingTool


def gate_writer(
    context: AppContext,
    audit: list[dict[str, Any]],
    approval: Any = "always",
    *more: dict[str, Any],
    mode: str = "function",
) -> RecordingTool:
    """The context's default agent becomes a writer whose `write_note` (which records each execution) needs
    approval under `approval` (`more`: other tools it has); its TOOL_AUDIT lines go to `audit`."""
    tool = RecordingTool()
    context.deps.tools._audit = audit.append
    context.deps.tools.registry.register(tool)
    tools = [{"name": "write_note", "approval": approval}, *more]
    agent = AgentDefinition(key=DEFAULT_AGENT, name="Writer", tools=tools, mode=mode)
    context.deps.agents = AgentCatalog([agent])
    return tool


def expire(context: AppContext, run_id: str, call_id: str) -> Wait:
    """The approval's time runs out: its WAIT item as it is once its expiry has passed (nobody answered)."""
    store = context.deps.waits
    wait = asyncio.run(store.get_wait(run_id, call_id))
    assert wait is not None and wait.kind == "approval" and wait.status == "waiting"
    past = wait.model_copy(update={"expires_at": 1})
    asyncio.run(store.create_wait(past))
    return past


def audit_approvals(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(call id, decision) of each TOOL_AUDIT line of a call that needed approval."""
    return [(line["toolCallId"], line["approval"]["decision"]) for line in lines if "approval" in line]
