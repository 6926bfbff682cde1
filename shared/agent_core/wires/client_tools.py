"""What a client's request changes about a run (every wire that takes input items): its function tools, the agent's
tools, LLM options."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from agent_core.llm.base import LlmClient, LlmDelta, LlmRequest
from agent_core.runtime.agents import AgentDefinition, ToolRef
from agent_core.tools.base import Tool, ToolContext, ToolFailure, ToolKind
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService
from agent_core.wires.input import FunctionToolParam


class _SchemaArgs(BaseModel):
    """Placeholder: a client tool's arguments are the client's business (its JSON schema goes to the model)."""


class ClientTool(Tool):
    """A function the client declared: shown to the model, never run here.

    The function strategy ends the run when the model calls one (TurnRequest.client_tools); the client
    answers with `function_call_output` in its next request. Should another path reach `run` (a ReAct
    fallback), the model gets an error result at once instead of a wait.
    """

    kind: ClassVar[ToolKind] = "frontend"  # the caller answers, like a browser tool
    args_model: ClassVar[type[BaseModel]] = _SchemaArgs
    schema_parameters: ClassVar[dict[str, Any]] = {}

    def parse_args(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        return value

    def parameters(self) -> dict[str, Any]:
        return self.schema_parameters

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        raise ToolFailure("error", "client_tool", f"{self.name} is run by the client, not by this server")


def client_tool(param: FunctionToolParam) -> Tool:
    parameters = param.parameters or {"type": "object", "properties": {}}
    attrs = {"name": param.name, "description": param.description or "", "schema_parameters": parameters}
    cls = type(f"Client_{param.name}", (ClientTool,), attrs)
    tool: Tool = cls()
    return tool


def with_client_tools(tools: ToolService, declared: list[Tool]) -> ToolService:
    """The same governance over a registry that also knows the client's tools (declared, never executed)."""
    if not declared:
        return tools
    registry = tools.registry.extended(declared)
    return tools.scoped(registry, set(registry.names()))


def request_agent(agent: AgentDefinition, registry: ToolRegistry, client: list[Tool]) -> AgentDefinition:
    """The agent as a client's request runs it (on any wire that takes input items).

    Its browser tools go (an API client cannot answer them); a client function replaces an agent tool of
    the same name; server-side tools (built-in, MCP, actions) stay.
    """
    names = {t.name for t in client}

    def browser(name: str) -> bool:
        tool = registry.get(name)
        return tool is not None and tool.kind == "frontend"

    kept = [ref for ref in agent.tools if ref.name not in names and not browser(ref.name)]
    refs = kept + [ToolRef(name=t.name) for t in client]
    actions = [a for a in agent.actions if a.name not in names]
    return agent.model_copy(update={"tools": refs, "frontend_tools": [], "actions": actions})


@dataclass
class TunedLlm:
    """The run's LLM with the request's options: temperature, max output tokens, tool_choice, parallel calls, stop."""

    inner: LlmClient
    temperature: float | None = None
    max_tokens: int | None = None
    no_tools: bool = False
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stop: list[str] | None = None

    @property
    def changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if self.temperature is not None:
            changes["temperature"] = self.temperature
        if self.max_tokens is not None:
            changes["max_tokens"] = self.max_tokens
        if self.no_tools:
            changes["tools"] = []
        if self.tool_choice is not None:
            changes["tool_choice"] = self.tool_choice
        if self.parallel_tool_calls is not None:
            changes["parallel_tool_calls"] = self.parallel_tool_calls
        if self.stop:
            changes["stop"] = self.stop
        return changes

    def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        changes = self.changes
        if request.purpose == "summarize" or not changes:
            return self.inner.stream(request)
        return self.inner.stream(request.model_copy(update=changes))
