"""A client's input as a turn's: its input items as chat messages, and the function tools it declares.

Every wire that takes input items (Responses, Chat Completions through them, AG-UI, the UI stream) reads them
here; `wires/turn.py` plans the turn from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_core.domain.models import Role, ToolCall
from agent_core.domain.text import utf8_size
from agent_core.errors import InvalidRequest, PayloadTooLarge

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.SYSTEM}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FunctionToolParam(WireModel):
    """A function tool declared by the client: the client runs it and returns `function_call_output`."""

    type: Literal["function"]
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = Field(None, max_length=8192)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    def echo(self) -> dict[str, Any]:
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters or {"type": "object", "properties": {}},
            "strict": self.strict,
        }


def function_tools(tools: list[Any], param: str = "tools") -> list[FunctionToolParam]:
    """A UI client's tools (objects with `name`, `description`, `parameters`) as function tools; an invalid
    one is the caller's 422 naming `param`."""
    try:
        return [
            FunctionToolParam(type="function", name=t.name, description=t.description, parameters=t.parameters)
            for t in tools
        ]
    except ValidationError as error:
        raise InvalidRequest(f"invalid client tool: {error.errors()[0]['msg']}", param=param) from error


MAX_CLIENT_TOOLS = 128
ClientTools = Annotated[list[FunctionToolParam], Field(max_length=MAX_CLIENT_TOOLS)]
InputValue = str | list[dict[str, Any]]


class TurnInput(WireModel):
    """A UI wire's new input and tools, checked as the Responses API checks its own."""

    input: InputValue
    tools: ClientTools = Field(default_factory=list)


def turn_input(**fields: Any) -> TurnInput:
    """A refused value (129 tools, a bad tool name) is the caller's 4xx, naming the field, before any work."""
    try:
        return TurnInput(**fields)
    except ValidationError as error:
        raise invalid_field(error) from error


def invalid_field(error: ValidationError) -> InvalidRequest:
    first = error.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    return InvalidRequest(f"{param or 'request'}: {first['msg']}", param=param)


def check_item_count(value: InputValue, max_items: int) -> None:
    if isinstance(value, list) and len(value) > max_items:
        raise InvalidRequest(f"input has more than {max_items} items", param="input", code="too_many_items")


def check_unique_tools(tools: list[FunctionToolParam]) -> None:
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise InvalidRequest("function tool names must be unique", param="tools")


@dataclass(frozen=True)
class InputMessage:
    """One chat message an input item stands for."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True)
class ApprovalAnswer:
    """An `mcp_approval_response` item: a person's decision on an approval request the server sent."""

    request_id: str
    approve: bool
    reason: str = ""


@dataclass
class ParsedInput:
    messages: list[InputMessage] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)  # the input items as stored (with ids)
    approvals: list[ApprovalAnswer] = field(default_factory=list)

    @property
    def outputs(self) -> list[str]:
        """call_ids answered by function_call_output items."""
        return [m.tool_call_id for m in self.messages if m.role == Role.TOOL and m.tool_call_id]

    def split(self) -> tuple[list[InputMessage], InputMessage | None]:
        """History before the turn, and the message that starts it (a user message or a function output); None
        when approval responses start it (they continue the response that asked, with no new message)."""
        if self.approvals:
            if self.messages and self.messages[-1].role == Role.USER:
                raise InvalidRequest(
                    "mcp_approval_response items continue the response that asked: send a new message in a later "
                    "request",
                    param="input",
                )
            return self.messages, None
        if not self.messages or self.messages[-1].role not in (Role.USER, Role.TOOL):
            raise InvalidRequest("input must end with a user message or a function_call_output item", param="input")
        return self.messages[:-1], self.messages[-1]


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest("content must be a string or a list of content parts", param=f"{where}.content")
    texts: list[str] = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise InvalidRequest(f"unsupported content part type {kind!r}", param=f"{where}.content[{n}].type")
        texts.append(part["text"])
    return "\n".join(texts)


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _text(output, where)
    raise InvalidRequest("output must be a string or a list of content parts", param=f"{where}.output")


def _required(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{key} is required", param=f"{where}.{key}")
    return value


class _Parser:
    def __init__(self, prefix: str, max_bytes: int | None) -> None:
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.out = ParsedInput()
        self.names: dict[str, str] = {}  # call_id -> function name

    def sized(self, text: str, param: str) -> str:
        """`text` (an item's content, output or arguments) when within the per-message bound, else 413."""
        if self.max_bytes is not None and utf8_size(text, param) > self.max_bytes:
            raise PayloadTooLarge(f"{param} exceeds {self.max_bytes} bytes (UTF-8)", param=param)
        return text

    def item_id(self, kind: str) -> str:
        return f"{kind}_{self.prefix}_{len(self.out.items)}"

    def message(self, item: dict[str, Any], where: str) -> None:
        role = _ROLES.get(str(item.get("role")))
        if role is None:
            raise InvalidRequest(f"unsupported role {item.get('role')!r}", param=f"{where}.role")
        text = self.sized(_text(item.get("content"), where), f"{where}.content")
        self.out.messages.append(InputMessage(role, text))
        part_type = "output_text" if role == Role.ASSISTANT else "input_text"
        part: dict[str, Any] = {"type": part_type, "text": text}
        if role == Role.ASSISTANT:
            part["annotations"] = []
        stored = {"id": item.get("id") or self.item_id("msg"), "type": "message", "role": item["role"]}
        self.out.items.append({**stored, "status": "completed", "content": [part]})

    def call(self, call: ToolCall) -> None:
        """A tool call joins the assistant message before it (one model step), else starts one."""
        self.names[call.id] = call.name
        last = self.out.messages[-1] if self.out.messages else None
        if last is not None and last.role == Role.ASSISTANT:
            self.out.messages[-1] = InputMessage(Role.ASSISTANT, last.content, (*last.tool_calls, call))
        else:
            self.out.messages.append(InputMessage(Role.ASSISTANT, "", (call,)))

    def function_call(self, item: dict[str, Any], where: str) -> None:
        call_id, name = _required(item, "call_id", where), _required(item, "name", where)
        arguments = item.get("arguments") or "{}"
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.sized(arguments, f"{where}.arguments")
        self.call(ToolCall(id=call_id, name=name, arguments=arguments))
        stored = {"id": item.get("id") or self.item_id("fc"), "type": "function_call", "call_id": call_id}
        self.out.items.append({**stored, "name": name, "arguments": arguments, "status": "completed"})

    def function_output(self, item: dict[str, Any], where: str) -> None:
        call_id = _required(item, "call_id", where)
        output = self.sized(_output_text(item.get("output"), where), f"{where}.output")
        name = self.names.get(call_id)
        self.out.messages.append(InputMessage(Role.TOOL, output, tool_call_id=call_id, tool_name=name))
        stored = {"id": item.get("id") or self.item_id("fco"), "type": "function_call_output", "call_id": call_id}
        self.out.items.append({**stored, "output": output, "status": "completed"})

    def mcp_call(self, item: dict[str, Any], where: str) -> None:
        """A server-side call replayed by a stateless client: the call and its result."""
        call_id, name = _required(item, "id", where), _required(item, "name", where)
        arguments = self.sized(str(item.get("arguments") or "{}"), f"{where}.arguments")
        self.call(ToolCall(id=call_id, name=name, arguments=arguments))
        result = item.get("output") if item.get("output") is not None else {"error": item.get("error")}
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        self.sized(content, f"{where}.output")
        self.out.messages.append(InputMessage(Role.TOOL, content, tool_call_id=call_id, tool_name=name))
        self.out.items.append(dict(item))

    def approval_response(self, item: dict[str, Any], where: str) -> None:
        request_id = _required(item, "approval_request_id", where)
        approve = item.get("approve")
        if not isinstance(approve, bool):
            raise InvalidRequest("approve must be true or false", param=f"{where}.approve")
        reason = item.get("reason") or ""
        if not isinstance(reason, str):
            raise InvalidRequest("reason must be a string", param=f"{where}.reason")
        if any(answer.request_id == request_id for answer in self.out.approvals):
            raise InvalidRequest(
                f"approval request {request_id} is answered twice", param=f"{where}.approval_request_id"
            )
        self.out.approvals.append(ApprovalAnswer(request_id, approve, self.sized(reason, f"{where}.reason")))
        stored = {"id": item.get("id") or self.item_id("mcpa"), "type": "mcp_approval_response"}
        self.out.items.append(
            {**stored, "approval_request_id": request_id, "approve": approve, "reason": reason or None}
        )

    def parse(self, value: str | list[dict[str, Any]]) -> ParsedInput:
        if isinstance(value, str):
            self.sized(value, "input")
            self.message({"role": "user", "content": value}, "input")
            return self.out
        for n, item in enumerate(value):
            where = f"input[{n}]"
            kind = item.get("type", "message")
            if kind == "message":
                self.message(item, where)
            elif kind == "function_call":
                self.function_call(item, where)
            elif kind == "function_call_output":
                self.function_output(item, where)
            elif kind == "mcp_call":
                self.mcp_call(item, where)
            elif kind == "mcp_approval_response":
                self.approval_response(item, where)
            elif kind == "mcp_approval_request":  # a stateless client's replay of what the server asked
                self.out.items.append(dict(item))
            elif kind != "reasoning":  # reasoning items are not sent back to the model
                raise InvalidRequest(f"unsupported input item type {kind!r}", param=f"{where}.type")
        return self.out


def parse_input(value: str | list[dict[str, Any]], prefix: str, max_bytes: int | None = None) -> ParsedInput:
    """Input items in order as chat messages, plus the items as stored (ids `msg_{prefix}_{n}`...).

    `max_bytes` bounds each item's text (413 `message_too_large`, param `input[n].content`...).
    """
    return _Parser(prefix, max_bytes).parse(value)


def check_self_contained(parsed: ParsedInput) -> None:
    """Stateless input (store:false, Chat Completions) is the whole conversation: each output answers a call
    before it in the input (OpenAI refuses a `tool` message that follows no `tool_calls` too). Else the model
    would be called without it, and without any user message."""
    for message in parsed.messages:
        if message.role == Role.TOOL and message.tool_name is None:  # no call of that id came before it
            call_id = message.tool_call_id
            raise InvalidRequest(f"no tool call found for function call output with call_id {call_id}", param="input")


def check_outputs(pending: list[str], parsed: ParsedInput) -> None:
    """Continuing a response that handed calls over needs exactly those outputs (as OpenAI requires)."""
    given = parsed.outputs
    for call_id in given:
        if call_id not in pending:
            raise InvalidRequest(f"no tool call found for function call output with call_id {call_id}", param="input")
    for call_id in pending:
        if call_id not in given:
            raise InvalidRequest(f"no tool output found for function call {call_id}", param="input")
