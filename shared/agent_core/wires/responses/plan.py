"""A Responses request as a turn: its rules and the caller's objects checked, then planned as every wire's turn is
(`wires/turn.py`: agent, chat, input, request-scoped deps) and opened with `wires.turn.open_turn`."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Chat
from agent_core.errors import InvalidRequest, NotFound, RunInProgress
from agent_core.store.base import ChatStore
from agent_core.store.responses import ACTIVE, ResponseRecord, ResponseStore
from agent_core.wires.approval_answers import Found, check_answered, decide, find
from agent_core.wires.input import ParsedInput, check_outputs, check_self_contained, parse_input
from agent_core.wires.responses.aggregate import response_object
from agent_core.wires.responses.approvals import pending_approvals
from agent_core.wires.responses.request import ResponseCreate, check_limits, check_rules, pending_calls
from agent_core.wires.turn import LlmOptions, TurnPlan, plan_turn, refuse_approvals, screen_input


def new_response_id() -> str:
    return f"resp_{sortable_id()}"


def previous_not_found() -> InvalidRequest:
    return InvalidRequest(
        "previous response not found", param="previous_response_id", code="previous_response_not_found"
    )


@dataclass(kw_only=True)
class ResponsePlan(TurnPlan):
    """A turn's plan, plus the Response it answers with."""

    response_id: str
    body: ResponseCreate
    created_at: int
    answers: Found = dataclasses.field(default_factory=list)  # approval requests the input answers (found)

    def response(self, status: str, chat_id: str | None = None) -> dict[str, Any]:
        """The Response before any output."""
        chat_id = chat_id or (self.chat.chat_id if self.chat else None)
        return response_object(
            self.body,
            response_id=self.response_id,
            created_at=self.created_at,
            model=self.body.model or self.agent.key,
            status=status,
            conversation_id=chat_id if self.body.stored else None,
        )

    def record(self, status: str, chat_id: str | None = None, run_id: str | None = None) -> ResponseRecord:
        return ResponseRecord(
            response_id=self.response_id,
            user_id=self.user_id,
            status=status,
            chat_id=chat_id or (self.chat.chat_id if self.chat else None),
            run_id=run_id,
            previous_response_id=self.body.previous_response_id,
            background=bool(self.body.background),
            created_at=self.created_at,
            input_items=self.parsed.items,
            response=self.response(status, chat_id),
            request=self.body.model_dump(mode="json", exclude_none=True) if self.body.background else None,
        )


def model_ids(deps: RunDeps) -> list[str]:
    """The models a request may name (GET /v1/models): the agents, and the configured model."""
    ids = [a.key for a in deps.agents.all()]
    if deps.settings.model not in ids:
        ids.append(deps.settings.model)
    return ids


def check_model(deps: RunDeps, model: str | None) -> None:
    """404 `model_not_found` for a model that is neither an agent nor the configured model (None: the default)."""
    if model is not None and model not in model_ids(deps):
        raise NotFound(f"model {model!r} not found", param="model", code="model_not_found")


async def _chat(chats: ChatStore, body: ResponseCreate, previous: ResponseRecord | None, user_id: str) -> Chat | None:
    chat_id = previous.chat_id if previous is not None else body.conversation_id
    if chat_id is None:
        return None
    chat = await chats.get_chat(chat_id, user_id)
    if chat is None:
        if previous is not None:
            raise previous_not_found()
        raise NotFound("conversation not found", param="conversation", code="conversation_not_found")
    return chat


async def _approvals(
    deps: RunDeps, body: ResponseCreate, chat: Chat | None, parsed: ParsedInput, user_id: str
) -> Found:
    """The approval requests the input answers, found (read only): `consume_approvals` decides them."""
    if not parsed.approvals:
        return []
    if not body.stored or chat is None:
        raise InvalidRequest(
            "mcp_approval_response items continue a stored response: give previous_response_id or conversation",
            param="input",
            code="approval_needs_previous_response",
        )
    return await find(deps.waits, deps.turns, user_id, chat.chat_id, parsed.approvals)


async def consume_approvals(plan: ResponsePlan) -> None:
    """Decide the approvals the request answers (once: a replay is 409), right before its turn opens."""
    if plan.answers:
        plan.decided = await decide(plan.deps.waits, plan.user_id, plan.answers)


async def plan_response(
    deps: RunDeps,
    responses: ResponseStore,
    body: ResponseCreate,
    user_id: str,
    *,
    response_id: str | None = None,
    created_at: int | None = None,
    now: datetime | None = None,
    public_base_url: str = "",
) -> ResponsePlan:
    """Check the request against its rules and the caller's objects; 4xx errors come from here."""
    s = deps.settings
    check_limits(body, max_items=s.max_input_items, max_instructions_bytes=s.max_instructions_bytes)
    check_rules(body)
    check_model(deps, body.model)
    response_id = response_id or new_response_id()
    parsed = parse_input(body.input, response_id.removeprefix("resp_"), s.max_message_bytes)
    parsed.split()
    if not body.stored:
        check_self_contained(parsed)
    previous = None
    if body.previous_response_id:
        previous = await responses.get(body.previous_response_id, user_id)
        if previous is None:
            raise previous_not_found()
        if previous.status in ACTIVE:
            raise RunInProgress("the previous response is still running", param="previous_response_id")
        check_outputs(pending_calls(previous.response.get("output") or []), parsed)
    chat = await _chat(deps.chats, body, previous, user_id)
    if previous is not None:
        check_answered(pending_approvals(previous.response.get("output") or []), parsed.approvals)
    answers = await _approvals(deps, body, chat, parsed, user_id)
    options = LlmOptions(body.temperature, body.max_output_tokens, body.tool_choice, body.parallel_tool_calls)
    turn = plan_turn(
        deps,
        user_id,
        parsed=parsed,
        chat=chat,
        model=body.model,
        tools=body.tools,
        stored=body.stored,
        options=options,
        instructions=body.instructions,
        now=now,
        public_base_url=public_base_url,
    )
    await screen_input(turn)
    if not body.stored and body.tool_choice != "none":
        refuse_approvals(turn.agent, turn.deps.tools, "Chat Completions or a Responses request with store: false")
        turn.approvals = "refuse"  # a call that would need approval does not run (the model reads why)
    if body.stored:  # a call that needs approval ends the Response with an mcp_approval_request
        turn.approvals = "hand_over"
    fields = {f.name: getattr(turn, f.name) for f in dataclasses.fields(TurnPlan)}
    created = created_at or int(time.time())
    return ResponsePlan(**fields, response_id=response_id, body=body, created_at=created, answers=answers)
