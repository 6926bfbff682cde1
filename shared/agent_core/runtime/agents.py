"""Agent definitions: the built-in agents plus one YAML file per agent in AGENT_DEFINITIONS_DIR."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from agent_core.domain.approval import ApprovalPolicy, PolicySpec
from agent_core.errors import NotFound
from agent_core.guardrails.policy import GuardrailPolicy
from agent_core.tools.mcp_config import McpServerConfig

DEFAULT_AGENT = "main-agent"
MAIN_PROMPT = (
    "You are a helpful assistant. Use the tools when they help; answer in the user's language. Be concise and precise."
)


class _Def(BaseModel):
    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel, extra="forbid")


class ToolRef(_Def):
    """A built-in tool by name; `quickMatch` overrides its quick rule (null disables it).

    An override fires under the same rules as a built-in one (plain requests only, never for frontend
    tools such as ask_user).
    """

    name: str
    quick_match: str | None = "__inherit__"
    approval: PolicySpec = "never"  # never | always | {when: <rule on the arguments>, reason?} (domain/approval.py)

    @field_validator("quick_match")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value not in (None, "__inherit__"):
            import re

            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"quickMatch is not a valid regular expression: {exc}") from exc
        return value

    @property
    def overrides_quick_match(self) -> bool:
        return self.quick_match != "__inherit__"


class DeclaredTool(_Def):
    """A frontend tool or UI action declared with a JSON-schema `parameters`."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class AgentDefinition(_Def):
    key: str = Field(pattern=r"^[a-zA-Z0-9_.-]{1,64}$")
    name: str
    description: str = ""
    model: str | None = None
    mode: Literal["function", "react", "direct", "chain"] = "function"
    # How chain's tool branch runs: ReAct JSON decisions ("prompt") or native tool calls ("function").
    strategy: Literal["prompt", "function"] = "prompt"
    system_prompt: str = MAIN_PROMPT
    tools: list[ToolRef] = Field(default_factory=list)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    frontend_tools: list[DeclaredTool] = Field(default_factory=list)
    actions: list[DeclaredTool] = Field(default_factory=list)
    max_steps: int = Field(8, ge=1, le=50)
    react_verbose: bool = False
    compose: Literal["single", "progressive"] = "single"
    enhance: bool = False
    version: str = "1"
    guardrails: GuardrailPolicy | None = None  # input / output / tool checks (docs/guardrails.md)
    # Approval policies by the name the model sees: any tool, MCP ones (`server__tool`) included; a tool in
    # `tools` may carry its own `approval` instead (naming one tool in both places is an error).
    approvals: dict[str, PolicySpec] = Field(default_factory=dict)

    @field_validator("tools", mode="before")
    @classmethod
    def _tool_refs(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _one_policy_per_tool(self) -> AgentDefinition:
        twice = sorted(ref.name for ref in self.tools if ref.approval != "never" and ref.name in self.approvals)
        if twice:
            raise ValueError(f"approval given both in tools and in approvals for {twice}")
        return self

    def approval_policies(self) -> dict[str, ApprovalPolicy]:
        """Every tool's policy but `never` (tools listed here and in `approvals`)."""
        policies = {ref.name: ApprovalPolicy(ref.approval) for ref in self.tools if ref.approval != "never"}
        policies.update({name: ApprovalPolicy(spec) for name, spec in self.approvals.items() if spec != "never"})
        return policies

    @property
    def tool_names(self) -> list[str]:
        """Every tool the agent may call (MCP tools are added per run after discovery)."""
        return [t.name for t in self.tools] + [t.name for t in self.frontend_tools] + [a.name for a in self.actions]


class AgentDefinitionError(Exception):
    """An invalid agent file: names the file, the field and the problem."""

    def __init__(self, path: Path, field: str, problem: str) -> None:
        super().__init__(f"{path}: field '{field}': {problem}")
        self.path, self.field, self.problem = path, field, problem


def load_definition(path: Path) -> AgentDefinition:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise AgentDefinitionError(path, "(file)", f"not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise AgentDefinitionError(path, "(file)", "must be a mapping of keys to values")
    try:
        return AgentDefinition.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        # (a tagged union's tag, such as an approval rule's `rule:test`, holds a colon: not a field)
        field = ".".join(str(p) for p in first["loc"] if ":" not in str(p)) or "(root)"
        raise AgentDefinitionError(path, field, first["msg"]) from exc


def load_definitions(directory: str) -> list[AgentDefinition]:
    """Every `*.yaml` in the directory, validated; the first invalid file stops the process from starting."""
    if not directory:
        return []
    root = Path(directory)
    if not root.is_dir():
        raise AgentDefinitionError(root, "AGENT_DEFINITIONS_DIR", "is not a directory")
    return [load_definition(p) for p in sorted(root.glob("*.yaml"))]


class AgentCatalog:
    """The known agents by key; an unknown key is a 404 that lists the known ones."""

    def __init__(self, agents: list[AgentDefinition]) -> None:
        self._agents = {a.key: a for a in agents}

    def get(self, key: str | None, param: str = "agentKey") -> AgentDefinition:
        """The agent; `param` names the request field that carried the key, for the 404."""
        agent = self._agents.get(key or DEFAULT_AGENT)
        if agent is None:
            known = ", ".join(sorted(self._agents))
            raise NotFound(f"unknown agent {key!r}; known agents: {known}", param=param, code="agent_not_found")
        return agent

    def all(self) -> list[AgentDefinition]:
        return list(self._agents.values())


def builtin_agents(tool_names: list[str]) -> list[AgentDefinition]:
    return [
        AgentDefinition(
            key=DEFAULT_AGENT,
            name="Main agent",
            description="General assistant with the built-in tools.",
            tools=[ToolRef(name=n) for n in tool_names],
        )
    ]


def catalog(tool_names: list[str], definitions_dir: str) -> AgentCatalog:
    """Built-in agents, then the YAML ones (a YAML agent may replace a built-in key)."""
    return AgentCatalog([*builtin_agents(tool_names), *load_definitions(definitions_dir)])
