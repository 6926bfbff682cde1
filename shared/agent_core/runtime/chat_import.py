"""Importing a past conversation: its messages stored in order with their own times, its session closed, and
the same background work as any chat's (session summary, then profile facts; memory records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_core.container import RunDeps
from agent_core.domain.ids import new_chat_id, sortable_id
from agent_core.domain.jobs import SessionSummaryJob
from agent_core.domain.models import Chat, Message, Role
from agent_core.domain.text import chat_name, validate_message
from agent_core.errors import InvalidRequest
from agent_core.memory.session_rules import new_session_id

MAX_IMPORT_MESSAGES = 2000


@dataclass(frozen=True)
class ImportedMessage:
    role: Literal["user", "assistant"]
    content: str
    created_at: int  # epoch ms


def check_import(messages: list[ImportedMessage], max_message_bytes: int) -> None:
    """Bounds and order, before anything is written: 422 `too_many_messages`, `messages_out_of_order`,
    `blank_message`; 413 `message_too_large`."""
    if not messages:
        raise InvalidRequest("messages must not be empty", param="messages", code="no_messages")
    if len(messages) > MAX_IMPORT_MESSAGES:
        raise InvalidRequest(
            f"at most {MAX_IMPORT_MESSAGES} messages per import", param="messages", code="too_many_messages"
        )
    previous = messages[0].created_at
    for index, message in enumerate(messages):
        validate_message(message.content, max_message_bytes)
        if message.created_at < 0:
            raise InvalidRequest(
                f"messages[{index}].createdAt is before 1970-01-01T00:00:00Z",
                param=f"messages[{index}].createdAt",
                code="invalid_created_at",
            )
        if message.created_at < previous:
            raise InvalidRequest(
                f"messages[{index}].createdAt is before the message it follows",
                param=f"messages[{index}].createdAt",
                code="messages_out_of_order",
            )
        previous = message.created_at


async def import_chat(
    deps: RunDeps, user_id: str, title: str, agent_key: str | None, messages: list[ImportedMessage]
) -> tuple[Chat, list[Message]]:
    """Create the chat and store its messages (ids sort as the messages do); then queue its summary and records."""
    check_import(messages, deps.settings.max_message_bytes)
    agent = deps.agents.get(agent_key)
    first, last = messages[0].created_at, messages[-1].created_at
    chat = Chat(
        chat_id=new_chat_id(),
        user_id=user_id,
        title=title.strip() or chat_name(messages[0].content),
        agent_key=agent.key,
        created_at=first,
        last_activity_at=last,
    )
    stored = [
        Message(
            id=sortable_id(m.created_at),
            chat_id=chat.chat_id,
            role=Role.USER if m.role == "user" else Role.ASSISTANT,
            content=m.content,
            created_at=m.created_at,
        )
        for m in messages
    ]
    await deps.chats.create_chat(chat)
    await deps.chats.add_messages(chat.chat_id, stored)
    # The conversation is over: its one session is ended at once (never opened on the chat) and summarised.
    # (The summary job queues the memory records job, as for every ended session.)
    job = SessionSummaryJob(
        chat_id=chat.chat_id, user_id=user_id, session_id=new_session_id(first), started_at=first, ended_at=last
    )
    await deps.work_queue.enqueue(job)
    return chat, stored
