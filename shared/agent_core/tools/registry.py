"""The tool registry: lookup by name, declarations for the model, quick-rule matching."""

from __future__ import annotations

from typing import Any

from agent_core.tools.base import Tool


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None, default_timezone: str = "UTC") -> None:
        self._tools: dict[str, Tool] = {}
        self.default_timezone = default_timezone
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI tool declarations for `names` (every tool when None)."""
        chosen = self._tools.values() if names is None else [self._tools[n] for n in names if n in self._tools]
        return [tool.schema() for tool in chosen]

    def quick_calls(self, message: str, among: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """Every tool among `among` whose quick rule matches the message, with its extracted arguments."""
        calls: list[tuple[str, dict[str, Any]]] = []
        for name in among:
            tool = self._tools.get(name)
            if tool is None or tool.quick_match is None:
                continue
            match = tool.quick_match.search(message)
            if match:
                calls.append((name, tool.quick_args(message, match, self.default_timezone)))
        calls.sort(key=lambda call: call[0])
        return calls
