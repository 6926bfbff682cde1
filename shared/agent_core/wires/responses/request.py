"""The OpenAI Responses request: its body and its parameter rules (its input items are `wires/input.py`'s)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from agent_core.domain.text import utf8_size
from agent_core.errors import InvalidRequest, PayloadTooLarge
from agent_core.wires.input import (
    ClientTools,
    InputValue,
    WireModel,
    check_item_count,
    check_unique_tools,
    invalid_field,
)

# OpenAI's metadata bounds: at most 16 pairs, keys up to 64 characters, values up to 512.
Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]], Field(max_length=16)
]


class ToolChoiceFunction(WireModel):
    type: Literal["function"]
    name: str


class ConversationParam(WireModel):
    id: str = Field(min_length=1, max_length=64)


class ResponseCreate(WireModel):
    """POST /v1/responses; unknown parameters are ignored, known ones are validated."""

    model: str | None = Field(None, min_length=1, max_length=200)
    input: InputValue  # bounded by `check_limits` (item count and size)
    instructions: str | None = None  # bounded by `check_limits`
    tools: ClientTools = Field(default_factory=list)
    tool_choice: Literal["none", "auto", "required"] | ToolChoiceFunction | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    store: bool | None = None
    background: bool | None = None
    previous_response_id: str | None = Field(None, min_length=1, max_length=128)
    conversation: Annotated[str, Field(min_length=1, max_length=64)] | ConversationParam | None = None
    metadata: Metadata | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    user: str | None = Field(None, max_length=256)

    @property
    def stored(self) -> bool:
        return self.store is not False

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationParam):
            return self.conversation.id
        return self.conversation

    @property
    def client_tools(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)


def response_request(**fields: Any) -> ResponseCreate:
    """The Responses request another wire's body stands for (Chat Completions, AG-UI, UI stream): a value the
    Responses rules refuse (129 tools, a bad tool name) is the caller's 4xx, naming the field, before any work."""
    try:
        return ResponseCreate(**fields)
    except ValidationError as error:
        raise invalid_field(error) from error


def check_limits(body: ResponseCreate, *, max_items: int, max_instructions_bytes: int) -> None:
    """The request's size bounds, checked before anything is read or written (413 / 400, stable codes)."""
    check_item_count(body.input, max_items)
    if body.instructions is not None and utf8_size(body.instructions, "instructions") > max_instructions_bytes:
        raise PayloadTooLarge(
            f"instructions exceed {max_instructions_bytes} bytes (UTF-8)",
            param="instructions",
            code="instructions_too_large",
        )


def check_rules(body: ResponseCreate) -> None:
    """The parameter combinations the API refuses (400 invalid_request_error)."""
    if body.previous_response_id and body.conversation is not None:
        raise InvalidRequest(
            "previous_response_id and conversation cannot be used together", param="previous_response_id"
        )
    if not body.stored:
        for name, value in (("previous_response_id", body.previous_response_id), ("conversation", body.conversation)):
            if value is not None:
                raise InvalidRequest(f"{name} needs store:true (the response history is not stored)", param=name)
        if body.background:
            raise InvalidRequest("background needs store:true (the result could not be retrieved)", param="background")
    check_unique_tools(body.tools)


def pending_calls(output: list[dict[str, Any]]) -> list[str]:
    """call_ids of a response's function_call items: the caller owes their outputs."""
    return [str(item["call_id"]) for item in output if item.get("type") == "function_call"]
