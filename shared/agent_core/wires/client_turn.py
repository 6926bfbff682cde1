"""A turn started by a UI client protocol (Vercel AI SDK UI stream, AG-UI) in a chat the client names.

The client's chat id (useChat's `id`, AG-UI's `threadId`) maps to a persisted chat of the caller: its
chat id is derived from the caller and the client's id, so two users' equal ids never meet and a chat
is only ever read through its owner. The server's history is authoritative: only the new input (the
user's message, or the outputs of the client's tools) is taken from the request. The input is read and the
turn planned and opened as every wire's (`wires/input.py`, `wires/turn.py`): the same limits, governance and
agent tools as the Responses API, without going through it.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.ids import now_ms, sortable_id
from agent_core.domain.models import Chat, Role
from agent_core.errors import AgentError
from agent_core.runtime.turn import PreparedTurn, chat_name
from agent_core.wires.input import (
    FunctionToolParam,
    check_item_count,
    check_outputs,
    check_unique_tools,
    parse_input,
    turn_input,
)
from agent_core.wires.turn import admit, open_turn, plan_turn

PENDING_WINDOW = 20  # recent messages read to find the calls a client owes


async def _pending_calls(deps: RunDeps, chat: Chat) -> list[str]:
    """Call ids of the chat's last assistant message not yet answered by a tool message after it."""
    recent = await deps.store.recent_messages(chat.chat_id, None, PENDING_WINDOW)
    pending: list[str] = []
    for message in recent.items:
        if message.role == Role.ASSISTANT:
            pending = [call.id for call in message.tool_calls]
        elif message.role == Role.TOOL and message.tool_call_id in pending:
            pending.remove(message.tool_call_id)
    return pending


def client_chat_id(user_id: str, client_id: str) -> str:
    """The persisted chat a client's chat id names for this caller."""
    digest = hashlib.sha256(f"{user_id}\x00{client_id}".encode()).hexdigest()
    return f"c_{digest[:24]}"


async def start_client_turn(
    deps: RunDeps,
    user_id: str,
    *,
    client_id: str,
    input_items: list[dict[str, Any]],
    agent_key: str | None = None,
    tools: list[FunctionToolParam] | None = None,
    now: datetime | None = None,
    public_base_url: str = "",
    input_param: str = "messages",
) -> PreparedTurn:
    """Check the input, create the caller's chat on first use, and take its lease (4xx errors before output).

    An existing chat keeps its agent; `agent_key` chooses the agent of a new one (unknown: 404). An error
    about the input names `input_param` (the client's field) as its param.
    """
    try:
        return await _start(deps, user_id, client_id, input_items, agent_key, tools, now, public_base_url)
    except AgentError as error:
        if error.param and error.param.startswith("input"):
            error.param = input_param
        raise


async def _start(
    deps: RunDeps,
    user_id: str,
    client_id: str,
    input_items: list[dict[str, Any]],
    agent_key: str | None,
    tools: list[FunctionToolParam] | None,
    now: datetime | None,
    public_base_url: str,
) -> PreparedTurn:
    given = turn_input(input=input_items, tools=tools or [])  # 4xx before any read
    chat_id = client_chat_id(user_id, client_id)
    chat = await deps.store.get_chat(chat_id, user_id)
    agent = chat.agent_key if chat is not None else deps.agents.get(agent_key).key
    settings = deps.settings
    check_item_count(given.input, settings.max_input_items)
    check_unique_tools(given.tools)
    parsed = parse_input(given.input, sortable_id(), settings.max_message_bytes)
    parsed.split()
    plan = plan_turn(
        deps,
        user_id,
        parsed=parsed,
        chat=None,
        model=agent,
        tools=given.tools,
        stored=True,
        now=now,
        public_base_url=public_base_url,
    )
    if tools or plan.parsed.outputs:
        # The calls the last run handed to the client are answered exactly (as /v1/responses requires).
        check_outputs(await _pending_calls(deps, chat) if chat is not None else [], plan.parsed)
    admission = await admit(plan)  # 429 before the client's chat or its input is written
    try:
        if chat is None:
            at = now_ms()
            first = next((m.content for m in plan.parsed.messages if m.content), "")
            chat = Chat(
                chat_id=chat_id,
                user_id=user_id,
                title=chat_name(first),
                agent_key=plan.agent.key,
                created_at=at,
                last_activity_at=at,
            )
            await deps.store.create_chat(chat)
        plan.chat = chat
        return await open_turn(plan)
    except BaseException:
        await asyncio.shield(admission.release())
        raise
