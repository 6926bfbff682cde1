"""Agent definitions: the built-in agents (YAML definitions extend these)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent_core.errors import NotFound

DEFAULT_AGENT = "main-agent"
MAIN_PROMPT = (
    "You are a helpful assistant. Use the tools when they help; answer in the user's language. Be concise and precise."
)


class AgentDefinition(BaseModel):
    key: str
    name: str
    description: str = ""
    model: str | None = None
    mode: Literal["function", "react", "direct", "chain"] = "function"
    system_prompt: str = MAIN_PROMPT
    tools: list[str] = Field(default_factory=list)
    max_steps: int = 8
    version: str = "1"


class AgentCatalog:
    """The known agents by key; an unknown key is a 404 that lists the known ones."""

    def __init__(self, agents: list[AgentDefinition]) -> None:
        self._agents = {a.key: a for a in agents}

    def get(self, key: str | None) -> AgentDefinition:
        agent = self._agents.get(key or DEFAULT_AGENT)
        if agent is None:
            known = ", ".join(sorted(self._agents))
            raise NotFound(f"unknown agent {key!r}; known agents: {known}", param="agentKey", code="agent_not_found")
        return agent

    def all(self) -> list[AgentDefinition]:
        return list(self._agents.values())


def builtin_agents(tool_names: list[str]) -> list[AgentDefinition]:
    return [
        AgentDefinition(
            key=DEFAULT_AGENT,
            name="Main agent",
            description="General assistant with the built-in tools.",
            tools=tool_names,
        )
    ]
