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
from agent_core.domain.models import Chat, Role, ToolCall
from agent_core.domain.text import chat_name
from agent_core.errors import AgentError
from agent_core.runtime.reservation import create_reserving
from agent_core.runtime.turn import PreparedTurn
from agent_core.store.base import ChatStore
from agent_core.wires.approval_answers import approval_request_id, check_answered, decide, find
from agent_core.wires.input import (
    FunctionToolParam,
    check_item_count,
    check_outputs,
    check_unique_tools,
    parse_input,
    turn_input,
)
from agent_core.wires.turn import admit, open_turn, plan_turn, screen_input

PENDING_WINDOW = 20  # recent messages read to find the calls a client owes


async def _pending_calls(chats: ChatStore, chat: Chat) -> tuple[str, list[ToolCall]]:
    """The run that made the chat's last assistant message, and its calls not yet answered by a tool message."""
    recent = await chats.recent_messages(chat.chat_id, None, PENDING_WINDOW)
    run_id, pending = "", []
    for message in recent.items:
        if message.role == Role.ASSISTANT:
            run_id, pending = message.run_id or "", list(message.tool_calls)
        elif message.role == Role.TOOL:
            pending = [call for call in pending if call.id != message.tool_call_id]
    return run_id, pending


def approval_item(request_id: object, approve: object, reason: object) -> dict[str, Any]:
    """A client's approval answer as the input item every wire's input takes (`mcp_approval_response`): its
    fields are checked there (a string id, a boolean, an optional text)."""
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve, "reason": reason}


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
    client_run_id: str | None = None,
    ui_message_id: str | None = None,
    request_id: str | None = None,
) -> PreparedTurn:
    """Check the input, create the caller's chat on first use, and take its lease (4xx errors before output).

    An existing chat keeps its agent; `agent_key` chooses the agent of a new one (unknown: 404). An error
    about the input names `input_param` (the client's field) as its param. A call that needs approval is
    handed to the client (the run ends with it); its answer (`approval_item`) comes in a later request and is
    decided here, once, before the turn runs the call (`wires/approval_answers.py`). `client_run_id` is the
    client's own id for the run (AG-UI's runId), kept with the run for a reconnect to name it; `ui_message_id`
    the UI message the run continues, kept with it for a resume to encode the stream as the live one did;
    `request_id` the turn's request id (its marker names the run: a client's repeated request finds it).
    """
    try:
        ids = (client_run_id, ui_message_id, request_id)
        return await _start(deps, user_id, client_id, input_items, agent_key, tools, now, public_base_url, ids)
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
    ids: tuple[str | None, str | None, str | None],  # the run's client run id, UI message id and request id
) -> PreparedTurn:
    given = turn_input(input=input_items, tools=tools or [])  # 4xx before any read
    chat_id = client_chat_id(user_id, client_id)
    chat = await deps.chats.get_chat(chat_id, user_id)
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
    await screen_input(plan)  # before the chat (named after the first message) is opened
    plan.approvals = "hand_over"  # the client answers in its next request: nobody can answer while it streams
    if tools or parsed.outputs or parsed.approvals:
        # The calls the last run handed to the client are answered exactly (as /v1/responses requires): its
        # tools' by their outputs, approvals by decisions; a new user message leaves an approval unanswered.
        run_id, pending = await _pending_calls(deps.chats, chat) if chat is not None else ("", [])
        client = {t.name for t in tools or []}
        check_outputs([c.id for c in pending if c.name in client], parsed)
        if parsed.outputs or parsed.approvals:  # a continuation: every approval asked is decided too
            asked = [approval_request_id(run_id, c.id) for c in pending if c.name not in client]
            check_answered(asked, parsed.approvals)
    # 429 before the client's chat or an approval is written: the reservation is written first when approvals
    # are decided, else with the client's chat when it is opened here, else with the turn's begin
    admission = await admit(plan, prepare=not parsed.approvals) if chat is None or parsed.approvals else None
    try:
        if parsed.approvals:  # found, then consumed once (409 for a replay) right before the turn opens
            assert chat is not None  # (answers were checked against its pending calls)
            found = await find(deps.waits, deps.turns, user_id, chat.chat_id, parsed.approvals)
            plan.decided = await decide(deps.waits, user_id, found)
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
            assert admission is not None  # (made above for a chat opened here)
            await create_reserving(deps, chat, None, admission)
        plan.chat = chat
        plan.client_run_id, plan.ui_message_id, plan.request_id = ids
        return await open_turn(plan)
    except BaseException:
        if admission is not None:
            await asyncio.shield(admission.release())
        raise
