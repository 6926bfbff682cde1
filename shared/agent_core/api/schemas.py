"""Request and response bodies of the native v1 API (camelCase on the wire)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent_core.domain.models import Chat, Message, ToolCallRecord
from agent_core.memory.calendar import from_ms

# Ids in paths and queries are store keys: bounded (DynamoDB refuses keys over 1-2 KB with a 500-making error).
MAX_ID = 128
PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID)]


class Body(BaseModel):
    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel, extra="ignore")


class RequestBody(Body):
    """A native route's request body: an unknown top-level field (a typo such as `chatid`) is refused with 422
    `unknown_field` naming it, instead of being ignored. The OpenAI, AG-UI and UI-stream wires keep their own
    tolerance (their clients send extra fields legitimately)."""

    model_config = ConfigDict(extra="forbid")


# A chat id a client names: never empty (`"chatId": ""` is refused, as `?chatId=` is; omit it for a new chat).
ChatId = Annotated[str, Field(min_length=1, max_length=64)]


def iso(ms: int) -> str:
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CreateConversation(RequestBody):
    title: str = Field("", max_length=200)


class ConversationOut(Body):
    conversation_id: str
    title: str
    created_at: str
    last_activity_at: str

    @staticmethod
    def of(chat: Chat) -> ConversationOut:
        return ConversationOut(
            conversation_id=chat.chat_id,
            title=chat.title,
            created_at=iso(chat.created_at),
            last_activity_at=iso(chat.last_activity_at),
        )


class ConversationList(Body):
    items: list[ConversationOut]
    next_cursor: str | None


class ToolCallOut(Body):
    id: str
    type: str = "function"
    name: str
    arguments: str


class MessageOut(Body):
    id: str
    role: str
    kind: str
    content: str
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    created_at: str

    @staticmethod
    def of(message: Message) -> MessageOut:
        calls = [ToolCallOut(id=c.id, name=c.name, arguments=c.arguments) for c in message.tool_calls]
        return MessageOut(
            id=message.id,
            role=message.role.value,
            kind=message.kind.value,
            content=message.content,
            tool_calls=calls or None,
            tool_call_id=message.tool_call_id,
            created_at=iso(message.created_at),
        )


class MessageList(Body):
    items: list[MessageOut]
    next_cursor: str | None


class ChatIn(RequestBody):
    message: str
    model: str | None = Field(None, max_length=200)
    request_id: str | None = Field(None, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")
    timezone: str | None = None  # IANA name; this request's zone instead of the profile's


class ChatOut(Body):
    request_id: str
    assistant_message: str
    tool_calls: list[ToolCallRecord]
    finish_reason: str
