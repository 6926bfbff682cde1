"""The tool registry: lookup by name, declarations for the model, quick-rule matching."""

from __future__ import annotations

import re
from typing import Any

from agent_core.tools.base import Tool
from agent_core.tools.quick_rules import requested

# Frontend tools and UI actions are called by the model only: a quick rule never fires them.
MODEL_ONLY_KINDS = frozenset({"frontend", "action"})


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None, default_timezone: str = "UTC") -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: dict[str, dict[str, Any]] = {}
        self.default_timezone = default_timezone
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool
        self._schemas[tool.name] = tool.schema()  # built once: schemas never change after registration

    def extended(self, tools: list[Tool]) -> ToolRegistry:
        """A copy with more tools (an agent's declared and MCP tools), sharing the built schemas."""
        copy = ToolRegistry(default_timezone=self.default_timezone)
        copy._tools = dict(self._tools)
        copy._schemas = dict(self._schemas)
        for tool in tools:
            copy.register(tool)
        return copy

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI tool declarations for `names` (every tool when None)."""
        chosen = list(self._tools) if names is None else [n for n in names if n in self._tools]
        return [self._schemas[n] for n in chosen]

    def quick_calls(
        self,
        message: str,
        among: set[str],
        overrides: dict[str, re.Pattern[str] | None] | None = None,
        *,
        for_model: bool = False,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Calls whose quick rule (or its override; None disables) plainly asks for the tool's result now.

        Questions about a topic never fire a rule (`quick_rules.requested`). Frontend tools and actions
        are left to the model, except when `for_model` (the offline model choosing its own calls).
        """
        calls: list[tuple[str, dict[str, Any]]] = []
        for name in among:
            tool = self._tools.get(name)
            if tool is None or (tool.kind in MODEL_ONLY_KINDS and not for_model):
                continue
            rule = overrides[name] if overrides and name in overrides else tool.quick_match
            if rule is None:
                continue
            match = requested(rule, message)
            if match:
                calls += [(name, args) for args in tool.quick_arg_sets(message, match, self.default_timezone)]
        calls.sort(key=lambda call: call[0])
        return calls
