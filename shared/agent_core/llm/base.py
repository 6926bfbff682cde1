"""The LlmClient port: a request in, a stream of typed deltas out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from agent_core.domain.models import Usage


class LlmRequest(BaseModel):
    """One Chat Completions call. `messages` and `tools` are in OpenAI chat format."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    # intent/react: JSON decisions; enhance: rewrite a raw result as the final answer
    purpose: Literal["chat", "summarize", "intent", "react", "enhance"] = "chat"
    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: str | dict[str, Any] | None = None  # "auto" | "required" | {"type": "function", ...}
    parallel_tool_calls: bool | None = None
    stop: list[str] | None = None  # up to 4 sequences where the model stops (a Chat Completions request's)


class ToolCallFragment(BaseModel):
    """A piece of one tool call, keyed by the model's index; id and name arrive on the first piece."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class LlmDelta(BaseModel):
    """One upstream delta: any of reasoning text, content text, tool-call fragments, finish, usage."""

    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[ToolCallFragment] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    # `provider:model` that produced this delta, set on the first delta when a fallback model answered.
    model: str | None = None


class LlmClient(Protocol):
    """Streams one completion. Raises `LlmUnavailable` when the provider fails after retries."""

    def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]: ...


async def complete_text(client: LlmClient, request: LlmRequest) -> tuple[str, Usage]:
    """Collect a whole text answer (used by summaries); tool calls are ignored."""
    parts: list[str] = []
    usage = Usage()
    async for delta in client.stream(request):
        if delta.content:
            parts.append(delta.content)
        if delta.usage:
            usage = delta.usage
    return "".join(parts), usage
