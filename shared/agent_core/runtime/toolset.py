"""An agent's tools for one run: built-ins it lists, its frontend tools and actions, its MCP servers' tools."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent_core.runtime.agents import AgentDefinition
from agent_core.tools.base import Tool
from agent_core.tools.frontend import declared_tool
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService


@dataclass
class Toolset:
    registry: ToolRegistry
    service: ToolService
    names: list[str]
    overrides: dict[str, re.Pattern[str] | None] = field(default_factory=dict)

    @property
    def kinds(self) -> dict[str, str]:
        return {n: t.kind for n in self.names if (t := self.registry.get(n)) is not None}

    def schemas(self) -> list[dict[str, Any]]:
        return self.registry.schemas(self.names)

    def quick_calls(self, message: str) -> list[tuple[str, dict[str, Any]]]:
        return self.registry.quick_calls(message, set(self.names), self.overrides)

    def describe(self) -> list[dict[str, Any]]:
        """Name, description and parameters of each tool (the ReAct prompt lists them)."""
        return [s["function"] for s in self.schemas()]


def build_toolset(agent: AgentDefinition, base: ToolService, extra: list[Tool] | None = None) -> Toolset:
    """The agent's registry (global built-ins + its declared and MCP tools) and governance scoped to it."""
    declared = [declared_tool("frontend", t.name, t.description, t.parameters) for t in agent.frontend_tools]
    declared += [declared_tool("action", a.name, a.description, a.parameters) for a in agent.actions]
    tools = [*declared, *(extra or [])]
    registry = base.registry.extended(tools) if tools else base.registry
    names = [*agent.tool_names, *(t.name for t in extra or [])]
    overrides = {
        ref.name: re.compile(ref.quick_match, re.IGNORECASE) if ref.quick_match else None
        for ref in agent.tools
        if ref.overrides_quick_match
    }
    service = base.scoped(registry, set(names), agent.approval_policies())
    # The model is offered (and quick rules match) only tools governance could let run; a call to any
    # other still meets governance and gets its precise denial.
    offered = [n for n in names if (tool := registry.get(n)) is None or service.permits(tool)]
    return Toolset(registry=registry, service=service, names=offered, overrides=overrides)
