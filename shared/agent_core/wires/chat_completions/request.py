"""The OpenAI Chat Completions request: its body, the parameters it refuses, and its messages as Responses input.

A Chat Completions request is a stateless Responses request (`store: false`): its `messages` become input
items (a message, an assistant's `tool_calls` as `function_call` items, a `tool` message as a
`function_call_output`), so the Responses planning and turn machinery runs it unchanged.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.errors import InvalidRequest
from agent_core.wires.input import FunctionToolParam
from agent_core.wires.responses.request import ResponseCreate, ToolChoiceFunction, response_request

_MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant"})
# Parameters this server cannot honour: sent with a non-default value they are refused (400), never ignored.
_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "response_format": (None, {"type": "text"}),
    "modalities": (None, ["text"]),
    "audio": (None,),
    "prediction": (None,),
    "functions": (None,),
    "function_call": (None,),
    "logit_bias": (None, {}),
    "seed": (None,),
    "top_p": (None, 1, 1.0),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "web_search_options": (None,),
    "reasoning_effort": (None,),
    "service_tier": (None, "auto", "default"),
    "store": (None, False),  # nothing is stored: a Chat Completions request is stateless
    "metadata": (None, {}),  # only meaningful for stored completions
}


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatFunction(BaseModel):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = Field(None, max_length=8192)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(BaseModel):
    type: Literal["function"]
    function: ChatFunction


class StreamOptions(BaseModel):
    include_usage: bool | None = None


class ChatCompletionCreate(_Wire):
    """POST /v1/chat/completions. Unsupported parameters with a non-default value are refused (see `check`)."""

    model: str = Field(min_length=1, max_length=200)
    messages: list[dict[str, Any]] = Field(min_length=1)  # bounded by the Responses input limits
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    stop: str | list[str] | None = None
    tools: list[ChatTool] = Field(default_factory=list, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = Field(None, max_length=256)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def stop_sequences(self) -> list[str] | None:
        if self.stop is None:
            return None
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def client_tools(self) -> frozenset[str]:
        return frozenset(t.function.name for t in self.tools)

    def check(self) -> None:
        """The parameters and combinations refused with 400 before any work."""
        extra = self.model_extra or {}
        for name, defaults in _DEFAULTS.items():
            if name in extra and extra[name] not in defaults:
                raise InvalidRequest(
                    f"{name} is not supported by this server", param=name, code="unsupported_parameter"
                )
        if self.stream_options is not None and not self.stream:
            raise InvalidRequest("stream_options is only allowed with stream: true", param="stream_options")
        if self.max_tokens and self.max_completion_tokens and self.max_tokens != self.max_completion_tokens:
            raise InvalidRequest("max_tokens and max_completion_tokens differ", param="max_tokens")
        stops = self.stop_sequences or []
        if len(stops) > 4 or any(not s for s in stops):
            raise InvalidRequest("stop takes up to 4 non-empty sequences", param="stop")
        if isinstance(self.tool_choice, dict):
            named = (self.tool_choice.get("function") or {}).get("name")
            if self.tool_choice.get("type") != "function" or not isinstance(named, str):
                raise InvalidRequest("tool_choice must name a function", param="tool_choice")
            if named not in self.client_tools:
                raise InvalidRequest(f"tool_choice names an undeclared tool {named!r}", param="tool_choice")


def _content(message: dict[str, Any], where: str) -> Any:
    content = message.get("content")
    if content is None or isinstance(content, str | list):
        return content or ""
    raise InvalidRequest("content must be a string or a list of content parts", param=f"{where}.content")


def _input_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as Responses input items, in order."""
    items: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict):
            raise InvalidRequest("a message must be an object", param=where)
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidRequest("tool_call_id is required", param=f"{where}.tool_call_id")
            items.append({"type": "function_call_output", "call_id": call_id, "output": _content(message, where)})
            continue
        if role not in _MESSAGE_ROLES:
            raise InvalidRequest(f"unsupported role {role!r}", param=f"{where}.role")
        content = _content(message, where)
        calls = message.get("tool_calls") or [] if role == "assistant" else []
        if content or not calls:
            items.append({"type": "message", "role": role, "content": content})
        for k, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or call.get("type", "function") != "function":
                raise InvalidRequest("a tool call must be a function call", param=f"{where}.tool_calls[{k}]")
            arguments = function.get("arguments") or "{}"
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            item = {"type": "function_call", "call_id": call.get("id"), "name": function.get("name")}
            items.append({**item, "arguments": arguments})
    return items


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    if isinstance(choice, dict):
        return ToolChoiceFunction(type="function", name=choice["function"]["name"])
    return choice


def as_response_request(body: ChatCompletionCreate) -> ResponseCreate:
    """The stateless Responses request that runs this Chat Completions request."""
    tools = [
        FunctionToolParam(
            type="function",
            name=t.function.name,
            description=t.function.description,
            parameters=t.function.parameters,
            strict=t.function.strict,
        )
        for t in body.tools
    ]
    return response_request(
        model=body.model,
        input=_input_items(body.messages),
        tools=tools,
        tool_choice=_tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls,
        store=False,
        max_output_tokens=body.max_completion_tokens or body.max_tokens,
        temperature=body.temperature,
        user=body.user,
    )
