"""The Tool port: a named, typed, governed capability the model can call."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from agent_core.config import Settings
from agent_core.domain.approval import ApprovalOutcome
from agent_core.memory.long_term import LongTermMemory
from agent_core.store.base import MemoryReader
from agent_core.store.blob import BlobStore
from agent_core.tools.data_links import DataLinks

ToolKind = Literal["backend", "mcp", "frontend", "action"]


class FrontendBridge(Protocol):
    """How a frontend tool waits for the browser's answer (POST /api/ap/submit)."""

    async def await_submit(self, tool_call_id: str, timeout_ms: int) -> dict[str, Any] | None: ...


class ApprovalGate(Protocol):
    """How a call that needs approval waits for a person's decision (POST /api/ap/submit {approve})."""

    async def await_decision(self, tool_call_id: str, timeout_ms: int) -> ApprovalOutcome: ...


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves; passed in, never global."""

    request_id: str
    conversation_id: str
    user_id: str
    settings: Settings
    timezone: str
    now: datetime
    run_id: str = ""
    tool_call_id: str = ""
    blobs: BlobStore | None = None
    frontend: FrontendBridge | None = None
    approvals: ApprovalGate | None = None  # None: no call may wait for approval here (it is denied)
    memory: MemoryReader | None = None  # the user's memory, read-only (the memory tools)
    records: LongTermMemory | None = None  # the user's long-term memory records (search_memory)
    public_base_url: str = ""  # where clients reach the API (no trailing slash); '' for root-relative links
    links: DataLinks | None = None  # signs data-file links (the wall clock); None: built from `settings`


class ToolFailure(Exception):
    """Raised by a tool to report a governed, non-ok result (status + reason) to the model."""

    def __init__(self, status: str, reason: str, message: str = "", result: Any = None) -> None:
        super().__init__(message or reason)
        self.status = status
        self.reason = reason
        self.message = message or reason
        self.result = result  # what the result event carries instead of an error object, when set


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

    def quick_arg_sets(self, message: str, match: re.Match[str], ctx_timezone: str) -> list[dict[str, Any]]:
        """One argument set per call the quick rule makes (several when the message asks for several)."""
        return [self.quick_args(message, match, ctx_timezone)]

    def parse_args(self, value: Any) -> Any:
        """Validated arguments (the JSON the model sent, parsed); raises ValueError when invalid."""
        return self.args_model.model_validate(value)

    def effective_timeout_ms(self, settings: Settings) -> int:
        return self.timeout_ms or settings.tool_timeout_ms

    def parameters(self) -> dict[str, Any]:
        return self.args_model.model_json_schema()

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool declaration."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }

    @abstractmethod
    async def run(self, args: Any, ctx: ToolContext) -> Any:
        """Execute with validated arguments; return a JSON-serialisable result."""
