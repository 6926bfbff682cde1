"""Drive a turn in-process and collect its wire events (for orchestration tests)."""

from __future__ import annotations

from typing import Any

from agent_core.context import AppContext
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.models import Chat
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn


async def run_turn(context: AppContext, agent_key: str, message: str, user: str = "u") -> list[dict[str, Any]]:
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id=user, agent_key=agent_key, created_at=at, last_activity_at=at)
    await context.deps.chats.create_chat(chat)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id=user, chat_id=chat.chat_id, message=message))
    assert isinstance(prepared, PreparedTurn)
    return [e.wire() async for e in TurnRunner(prepared).events()]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "content.delta")
