"""Run events: one small model per type of the native protocol; encoders turn them into wire formats.

The runtime yields these without the envelope; the protocol assembler stamps seq, timestamp and ids.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from agent_core.domain.models import Usage


class Event(BaseModel):
    """A run event; its fields go on the wire in camelCase (`chunk_index` as `chunkIndex`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    type: str

    def wire(self) -> dict[str, Any]:
        """camelCase fields, empty optional fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True)


class RequestQuery(Event):
    type: Literal["request.query"] = "request.query"
    message: str
    agent_key: str


class ChatStart(Event):
    type: Literal["chat.start"] = "chat.start"
    chat_name: str


class RunStart(Event):
    type: Literal["run.start"] = "run.start"
    agent_key: str
    model: str


class RunRoute(Event):
    type: Literal["run.route"] = "run.route"
    mode: str
    matched_tools: list[str] | None = None
    reason: str | None = None


class ReasoningStart(Event):
    type: Literal["reasoning.start"] = "reasoning.start"
    reasoning_id: str


class ReasoningDelta(Event):
    type: Literal["reasoning.delta"] = "reasoning.delta"
    reasoning_id: str
    delta: str


class ReasoningEnd(Event):
    type: Literal["reasoning.end"] = "reasoning.end"
    reasoning_id: str


class ContentStart(Event):
    type: Literal["content.start"] = "content.start"
    content_id: str


class ContentDelta(Event):
    type: Literal["content.delta"] = "content.delta"
    content_id: str
    delta: str


class ContentEnd(Event):
    type: Literal["content.end"] = "content.end"
    content_id: str


class ToolStart(Event):
    type: Literal["tool.start"] = "tool.start"
    tool_id: str
    tool_name: str
    tool_type: str


class ToolArgs(Event):
    type: Literal["tool.args"] = "tool.args"
    tool_id: str
    delta: str
    chunk_index: int


class ToolEnd(Event):
    type: Literal["tool.end"] = "tool.end"
    tool_id: str


class ToolResult(Event):
    type: Literal["tool.result"] = "tool.result"
    tool_id: str
    result: Any = None
    status: str
    reason: str | None = None


class ToolApproval(Event):
    """A call needs a person's approval before it runs: answered by POST /api/ap/submit {runId, toolId, approve}."""

    type: Literal["tool.approval"] = "tool.approval"
    tool_id: str
    tool_name: str
    args: Any = None
    reason: str


class RunWarning(Event):
    type: Literal["run.warning"] = "run.warning"
    code: str
    message: str


# Why a run completed (`run.complete.finishReason`); docs/protocol.md describes each.
FinishReason = Literal["stop", "max_steps", "tool_calls", "user_input", "deadline"]


class RunComplete(Event):
    type: Literal["run.complete"] = "run.complete"
    finish_reason: str
    usage: dict[str, int] | None = None
    model: str | None = None  # `provider:model` that answered, when a fallback chain is configured

    @staticmethod
    def of(finish_reason: str, usage: Usage, model: str | None = None) -> RunComplete:
        return RunComplete(
            finish_reason=finish_reason,
            usage={"promptTokens": usage.prompt_tokens, "completionTokens": usage.completion_tokens},
            model=model,
        )


class RunError(Event):
    type: Literal["run.error"] = "run.error"
    code: str
    message: str
    # A turn a budget or rate limit refused (`budget_exceeded`, `rate_limited`): seconds until it may be
    # tried again, the limit hit and what remains of each limit (the 429 body's `data`).
    retry_after: int | None = None
    limit: str | None = None
    remaining: dict[str, Any] | None = None


class RunCancel(Event):
    type: Literal["run.cancel"] = "run.cancel"
    reason: str | None = None


TERMINAL_TYPES = frozenset({"run.complete", "run.error", "run.cancel"})


class ActionStart(Event):
    type: Literal["action.start"] = "action.start"
    action_id: str
    action_name: str


class ActionArgs(Event):
    type: Literal["action.args"] = "action.args"
    action_id: str
    delta: str
    chunk_index: int


class ActionEnd(Event):
    type: Literal["action.end"] = "action.end"
    action_id: str


class ActionResult(Event):
    type: Literal["action.result"] = "action.result"
    action_id: str
    result: Any = None


class RequestSubmit(Event):
    type: Literal["request.submit"] = "request.submit"
    tool_id: str
    params: Any = None


class ReactStep(Event):
    """One ReAct step (with reactVerbose): the model's thought, its action and what it observed."""

    type: Literal["react.step"] = "react.step"
    step: int
    thought: str | None = None
    action: str
    action_input: Any = None
    observation: Any = None
