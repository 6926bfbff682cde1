"""A Responses request as a turn: its plan (agent, chat, input, request-scoped deps), then the prepared turn.

store:false swaps in `ephemeral_deps` (a request-scoped in-memory store): the same pipeline, nothing durable.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.ids import new_chat_id, now_ms, sortable_id
from agent_core.domain.models import Chat, Message, Role
from agent_core.errors import AgentError, InvalidRequest, NotFound, RunInProgress
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.ephemeral import ephemeral_deps
from agent_core.runtime.turn import PreparedTurn, TurnRequest, chat_name, prepare_turn, validate_message
from agent_core.store.responses import ACTIVE, ResponseRecord, ResponseStore
from agent_core.wires.responses.aggregate import response_object
from agent_core.wires.responses.client_tools import TunedLlm, client_tool, responses_agent, with_client_tools
from agent_core.wires.responses.request import (
    InputMessage,
    ParsedInput,
    ResponseCreate,
    check_limits,
    check_outputs,
    check_rules,
    check_self_contained,
    parse_input,
    pending_calls,
)


def new_response_id() -> str:
    return f"resp_{sortable_id()}"


def previous_not_found() -> InvalidRequest:
    return InvalidRequest(
        "previous response not found", param="previous_response_id", code="previous_response_not_found"
    )


@dataclass
class ResponsePlan:
    """Everything decided before the turn starts; building it writes nothing."""

    response_id: str
    user_id: str
    body: ResponseCreate
    deps: RunDeps  # request-scoped: the client's tools, the LLM options, ephemeral storage for store:false
    agent: AgentDefinition
    model: str | None  # a model name that overrides the agent's
    chat: Chat | None  # the conversation this response continues
    parsed: ParsedInput
    created_at: int
    now: datetime | None = None
    public_base_url: str = ""
    deadline_ms: int | None = None  # a blocking response's turn deadline; else the stream deadline

    @property
    def client_tools(self) -> frozenset[str]:
        return self.body.client_tools

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


def _agent(deps: RunDeps, model: str | None, chat: Chat | None) -> tuple[AgentDefinition, str | None]:
    """`model` names an agent, or the configured model the chat's agent (else the default agent) runs with."""
    keys = {a.key for a in deps.agents.all()}
    if model in keys:
        return deps.agents.get(model), None
    return deps.agents.get(chat.agent_key if chat else None), model


async def _chat(deps: RunDeps, body: ResponseCreate, previous: ResponseRecord | None, user_id: str) -> Chat | None:
    chat_id = previous.chat_id if previous is not None else body.conversation_id
    if chat_id is None:
        return None
    chat = await deps.store.get_chat(chat_id, user_id)
    if chat is None:
        if previous is not None:
            raise previous_not_found()
        raise NotFound("conversation not found", param="conversation", code="conversation_not_found")
    return chat


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
    chat = await _chat(deps, body, previous, user_id)
    base, model = _agent(deps, body.model, chat)
    declared = [client_tool(t) for t in body.tools]
    if declared and base.mode != "function":
        raise InvalidRequest(f"agent {base.key!r} ({base.mode}) cannot call client function tools", param="tools")
    agent = responses_agent(base, deps.tools.registry, declared)
    llm = TunedLlm(
        deps.llm,
        body.temperature,
        body.max_output_tokens,
        no_tools=body.tool_choice == "none",
        tool_choice=_chat_tool_choice(body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls,
    )
    run_deps = dataclasses.replace(
        deps, tools=with_client_tools(deps.tools, declared), llm=llm, agents=AgentCatalog([agent])
    )
    if not body.stored:
        run_deps = ephemeral_deps(run_deps, agent)
    return ResponsePlan(
        response_id=response_id,
        user_id=user_id,
        body=body,
        deps=run_deps,
        agent=agent,
        model=model,
        chat=chat,
        parsed=parsed,
        created_at=created_at or int(time.time()),
        now=now,
        public_base_url=public_base_url,
    )


def to_message(spec: InputMessage, chat_id: str, at: int) -> Message:
    """An input item's message, stored in the chat."""
    return Message(
        id=sortable_id(at),
        chat_id=chat_id,
        role=spec.role,
        content=spec.content,
        tool_calls=list(spec.tool_calls),
        tool_call_id=spec.tool_call_id,
        tool_name=spec.tool_name,
        created_at=at,
    )


async def open_turn(plan: ResponsePlan) -> PreparedTurn:
    """Write the input's history into the chat and take the chat's lease with the turn's first message.

    A turn continued only by function outputs writes them as history and stores no USER message: the
    model is called with the outputs last (`TurnRequest.continuation`).
    """
    deps, chat = plan.deps, plan.chat
    prior, trigger = plan.parsed.split()
    continuation = trigger.role != Role.USER
    message = "" if continuation else trigger.content
    history = [*prior, trigger] if continuation else prior
    if not continuation:
        try:
            validate_message(message, deps.settings.max_message_bytes)
        except AgentError as error:
            error.param = "input"
            raise
    at = now_ms()
    if chat is not None and chat.active_run_id and (chat.lease_expires_at or 0) > at:
        raise RunInProgress("another turn is running in this conversation")
    if chat is None and history:
        first = next((m.content for m in plan.parsed.messages if m.role == Role.USER), message)
        chat = Chat(
            chat_id=new_chat_id(),
            user_id=plan.user_id,
            title=chat_name(first),
            agent_key=plan.agent.key,
            created_at=at,
            last_activity_at=at,
        )
        await deps.store.create_chat(chat)
    if history:
        assert chat is not None
        await deps.store.add_messages(chat.chat_id, [to_message(m, chat.chat_id, at) for m in history])
    request = TurnRequest(
        user_id=plan.user_id,
        message=message,
        chat_id=chat.chat_id if chat else None,
        model=plan.model,
        agent_key=plan.agent.key,
        now=plan.now,
        client_tools=plan.client_tools,
        public_base_url=plan.public_base_url,
        deadline_ms=plan.deadline_ms,
        continuation=continuation,
    )
    prepared = await prepare_turn(deps, request)
    if not isinstance(prepared, PreparedTurn):  # a fresh request id is never a retry
        raise AgentError("unexpected replay of a stored result")
    if plan.body.instructions:
        prepared.extra_system.append(plan.body.instructions)
    return prepared


def _chat_tool_choice(choice: object) -> str | dict[str, Any] | None:
    """The Responses `tool_choice` in Chat Completions form ("none" is done by offering no tools)."""
    if choice in ("auto", "required"):
        return str(choice)
    name = getattr(choice, "name", None)
    if name:
        return {"type": "function", "function": {"name": name}}
    return None
