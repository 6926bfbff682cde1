"""What the app sends on the OpenAI-compatible routes, validated against the openai SDK's own types.

`WireCheck` wraps the app (ASGI): every Responses stream event, Response object, item list, conversation and
Chat Completions chunk or object it sends is validated with a pydantic `TypeAdapter` of the type in
`openai.types`, and a field the type does not know (the SDK's models accept extra fields silently) counts
as an error too. The fixtures assert `errors == []` when the test ends, so every Responses test checks its
whole wire without changing what it asserts.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, get_args

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDelta
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItemList
from openai.types.responses import Response, ResponseItemList, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter, ValidationError

from tests.support.sse import data_in

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
# The union's member for each `type` (the SDK's discriminator is its own, not pydantic's: validating against
# the whole union reports every member's errors), so an event is validated against the type it names.
_EVENT_TYPES: dict[str, TypeAdapter[Any]] = {
    get_args(member.model_fields["type"].annotation)[0]: TypeAdapter(member)
    for member in get_args(get_args(ResponseStreamEvent)[0])
}
# JSON bodies by their `object` field, per route family
_OBJECTS: dict[str, dict[str, TypeAdapter[Any]]] = {
    "/v1/responses": {"response": TypeAdapter(Response), "list": TypeAdapter(ResponseItemList)},
    "/v1/conversations": {
        "conversation": TypeAdapter(Conversation),
        "conversation.deleted": TypeAdapter(ConversationDeletedResource),
        "list": TypeAdapter(ConversationItemList),
    },
    "/v1/chat/completions": {
        "chat.completion": TypeAdapter(ChatCompletion),
        "chat.completion.chunk": TypeAdapter(ChatCompletionChunk),
    },
}


# Fields the real API sends that the SDK's types do not declare: a Response's `store` (OpenAI's own
# Responses carry it), and the `reasoning_content` delta OpenAI-compatible servers stream reasoning in.
EXTENSIONS = {(Response, "store"), (ChoiceDelta, "reasoning_content")}


def unknown_fields(value: Any, where: str = "") -> list[str]:
    """Paths of fields a validated openai model kept as extras (names its type does not declare)."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        extra = [name for name in value.model_extra or {} if (type(value), name) not in EXTENSIONS]
        found += [f"{where}.{name}" for name in extra]
        for name in type(value).model_fields:
            found += unknown_fields(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += unknown_fields(item, f"{where}[{i}]")
    return found


def validate(adapter: TypeAdapter[Any], payload: Any) -> list[str]:
    """Why `payload` is not a valid instance of the adapter's type (empty when it is)."""
    try:
        parsed = adapter.validate_python(payload)
    except ValidationError as error:
        return [str(error)]
    extra = unknown_fields(parsed)
    return [f"unknown fields {extra}"] if extra else []


def validate_stream_event(event: dict[str, Any]) -> list[str]:
    """An event is one of `ResponseStreamEvent`'s members: the one its `type` names."""
    adapter = _EVENT_TYPES.get(event.get("type", ""))
    if adapter is None:
        return [f"{event.get('type')!r} is no ResponseStreamEvent type"]
    return validate(adapter, event)


def validate_response(response: dict[str, Any]) -> list[str]:
    return validate(_OBJECTS["/v1/responses"]["response"], response)


class WireCheck:
    """ASGI middleware validating the /v1 routes' bodies as they are sent; `errors` collects what failed."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.errors: list[str] = []
        self.checked = 0

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        family = next((f for f in _OBJECTS if scope["type"] == "http" and scope["path"].startswith(f)), None)
        if family is None:
            await self.app(scope, receive, send)
            return
        where = f"{scope['method']} {scope['path']}"
        state: dict[str, Any] = {"status": 0, "sse": False, "buffer": b""}

        async def checked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
                state["status"] = message["status"]
                state["sse"] = headers.get("content-type", "").startswith("text/event-stream")
            elif message["type"] == "http.response.body" and state["status"] == 200:
                state["buffer"] += message.get("body", b"")
                if state["sse"]:
                    *events, state["buffer"] = state["buffer"].split(b"\n\n")
                    for event in events:
                        self._event(family, where, event)
                elif not message.get("more_body", False) and state["buffer"]:
                    self._object(family, where, json.loads(state["buffer"]))
            await send(message)

        await self.app(scope, receive, checked_send)

    def _event(self, family: str, where: str, raw: bytes) -> None:
        data = data_in(raw + b"\n\n")  # one message (the body was split at its blank line), or a ping
        if not data or data == ["[DONE]"]:
            return  # a ping (an SSE comment) or Chat Completions' end marker
        (message,) = data
        payload = json.loads(message)
        if family == "/v1/responses":
            self._record(where, payload, validate_stream_event(payload))
        else:
            self._object(family, where, payload)

    def _object(self, family: str, where: str, payload: Any) -> None:
        adapter = _OBJECTS[family].get(payload.get("object", "")) if isinstance(payload, dict) else None
        if adapter is None:
            return  # not an object the SDK types (GET /v1/models, a deletion receipt of ours)
        self._record(where, payload, validate(adapter, payload))

    def _record(self, where: str, payload: Any, errors: list[str]) -> None:
        self.checked += 1
        self.errors += [f"{where}: {error}\n{json.dumps(payload)[:2000]}" for error in errors]
