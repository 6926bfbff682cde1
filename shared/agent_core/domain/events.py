"""Run events: one small model per type of the native protocol; encoders turn them into wire formats.

The runtime yields these without the envelope; the protocol assembler stamps seq, timestamp and ids.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.domain.models import Usage


class Event(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    type: str

    def wire(self) -> dict[str, Any]:
        """camelCase fields, empty optional fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True)


class RequestQuery(Event):
    type: Literal["request.query"] = "request.query"
    message: str
    agent_key: str = Field(alias="agentKey")


class ChatStart(Event):
    type: Literal["chat.start"] = "chat.start"
    chat_name: str = Field(alias="chatName")


class RunStart(Event):
    type: Literal["run.start"] = "run.start"
    agent_key: str = Field(alias="agentKey")
    model: str


class RunRoute(Event):
    type: Literal["run.route"] = "run.route"
    mode: str
    matched_tools: list[str] | None = Field(None, alias="matchedTools")
    reason: str | None = None


class ReasoningStart(Event):
    type: Literal["reasoning.start"] = "reasoning.start"
    reasoning_id: str = Field(alias="reasoningId")


class ReasoningDelta(Event):
    type: Literal["reasoning.delta"] = "reasoning.delta"
    reasoning_id: str = Field(alias="reasoningId")
    delta: str


class ReasoningEnd(Event):
    type: Literal["reasoning.end"] = "reasoning.end"
    reasoning_id: str = Field(alias="reasoningId")


class ContentStart(Event):
    type: Literal["content.start"] = "content.start"
    content_id: str = Field(alias="contentId")


class ContentDelta(Event):
    type: Literal["content.delta"] = "content.delta"
    content_id: str = Field(alias="contentId")
    delta: str


class ContentEnd(Event):
    type: Literal["content.end"] = "content.end"
    content_id: str = Field(alias="contentId")


class ToolStart(Event):
    type: Literal["tool.start"] = "tool.start"
    tool_id: str = Field(alias="toolId")
    tool_name: str = Field(alias="toolName")
    tool_type: str = Field(alias="toolType")


class ToolArgs(Event):
    type: Literal["tool.args"] = "tool.args"
    tool_id: str = Field(alias="toolId")
    delta: str
    chunk_index: int = Field(alias="chunkIndex")


class ToolEnd(Event):
    type: Literal["tool.end"] = "tool.end"
    tool_id: str = Field(alias="toolId")


class ToolResult(Event):
    type: Literal["tool.result"] = "tool.result"
    tool_id: str = Field(alias="toolId")
    result: Any = None
    status: str
    reason: str | None = None


class RunWarning(Event):
    type: Literal["run.warning"] = "run.warning"
    code: str
    message: str


class RunComplete(Event):
    type: Literal["run.complete"] = "run.complete"
    finish_reason: str = Field(alias="finishReason")
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


class RunCancel(Event):
    type: Literal["run.cancel"] = "run.cancel"
    reason: str | None = None


TERMINAL_TYPES = frozenset({"run.complete", "run.error", "run.cancel"})


class ActionStart(Event):
    type: Literal["action.start"] = "action.start"
    action_id: str = Field(alias="actionId")
    action_name: str = Field(alias="actionName")


class ActionArgs(Event):
    type: Literal["action.args"] = "action.args"
    action_id: str = Field(alias="actionId")
    delta: str
    chunk_index: int = Field(alias="chunkIndex")


class ActionEnd(Event):
    type: Literal["action.end"] = "action.end"
    action_id: str = Field(alias="actionId")


class ActionResult(Event):
    type: Literal["action.result"] = "action.result"
    action_id: str = Field(alias="actionId")
    result: Any = None


class RequestSubmit(Event):
    type: Literal["request.submit"] = "request.submit"
    tool_id: str = Field(alias="toolId")
    params: Any = None


class ReactStep(Event):
    """One ReAct step (with reactVerbose): the model's thought, its action and what it observed."""

    type: Literal["react.step"] = "react.step"
    step: int
    thought: str | None = None
    action: str
    action_input: Any = Field(None, alias="actionInput")
    observation: Any = None
