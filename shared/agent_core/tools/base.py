"""The Tool port: a named, typed, governed capability the model can call."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from agent_core.config import Settings

ToolKind = Literal["backend", "mcp", "frontend", "action"]


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves; passed in, never global."""

    request_id: str
    conversation_id: str
    user_id: str
    settings: Settings
    timezone: str
    now: datetime
    extra: dict[str, Any] = field(default_factory=dict)


class ToolFailure(Exception):
    """Raised by a tool to report a governed, non-ok result (status + reason) to the model."""

    def __init__(self, status: str, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.status = status
        self.reason = reason
        self.message = message or reason


class Tool(ABC):
    """A tool: name, description, argument model, permissions, kind, timeout, optional quick rule."""

    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[BaseModel]]
    permissions: ClassVar[frozenset[str]] = frozenset()
    kind: ClassVar[ToolKind] = "backend"
    timeout_ms: ClassVar[int | None] = None
    quick_match: ClassVar[re.Pattern[str] | None] = None

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        """Arguments for a call made by the quick rule (no LLM routing call)."""
        return {}

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool declaration."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_model.model_json_schema(),
            },
        }

    @abstractmethod
    async def run(self, args: BaseModel, ctx: ToolContext) -> Any:
        """Execute with validated arguments; return a JSON-serialisable result."""
