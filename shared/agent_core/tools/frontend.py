"""Frontend tools (the browser answers) and actions (UI instructions): declared to the model like any tool."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from agent_core.config import Settings
from agent_core.tools.base import Tool, ToolContext, ToolFailure, ToolKind

# A frontend tool returns when its submit timeout ends; governance allows this much more.
_GRACE_MS = 5000


class FrontendTool(Tool):
    """Waits for POST /api/ap/submit; the submitted params are the result, `{}` with status timeout otherwise."""

    kind: ClassVar[ToolKind] = "frontend"

    def effective_timeout_ms(self, settings: Settings) -> int:
        return settings.frontend_submit_timeout_ms + _GRACE_MS

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        if ctx.frontend is None:
            raise ToolFailure("error", "frontend_unavailable", "this endpoint cannot wait for a browser")
        params = await ctx.frontend.await_submit(ctx.tool_call_id, ctx.settings.frontend_submit_timeout_ms)
        if params is None:
            raise ToolFailure("timeout", "timeout", "no submit before the timeout", result={})
        return params


class ActionTool(Tool):
    """A UI instruction: the client acts on action.* events; the run does not wait."""

    kind: ClassVar[ToolKind] = "action"
    result: ClassVar[Any] = None

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        return self.result if self.result is not None else {}


class _SchemaArgs(BaseModel):
    """Placeholder model: declared tools validate against their JSON schema's shape in parse_args."""


def declared_tool(kind: ToolKind, name: str, description: str, parameters: dict[str, Any]) -> Tool:
    """A frontend tool or action declared by an agent definition with a JSON-schema `parameters`."""
    base: type[Tool] = FrontendTool if kind == "frontend" else ActionTool
    required = [str(r) for r in parameters.get("required", [])]

    def parse_args(self: Tool, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        missing = [key for key in required if key not in value]
        if missing:
            raise ValueError(f"missing required arguments: {missing}")
        return value

    attrs = {
        "name": name,
        "description": description,
        "args_model": _SchemaArgs,
        "parse_args": parse_args,
        "parameters": lambda self: parameters,
    }
    cls = type(f"Declared_{kind}_{name}", (base,), attrs)
    tool: Tool = cls()
    return tool


class AskUserArgs(BaseModel):
    question: str = Field(description="The question to show the user")
    choices: list[str] | None = Field(None, description="Optional answers the user can pick from")


class AskUserTool(FrontendTool):
    """Built-in frontend tool: the browser asks the user and submits the answer."""

    name = "ask_user"
    description = "Ask the user a question (optionally with choices) and wait for the answer."
    args_model = AskUserArgs
    quick_match = re.compile(r"\bask me\b|let me (?:choose|pick|decide)|问我|让我(?:选|决定)", re.IGNORECASE)

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        choices = re.findall(r"[\"“「]([^\"”」]{1,40})[\"”」]", message)
        args: dict[str, Any] = {"question": message.strip()}
        if choices:
            args["choices"] = choices
        return args
