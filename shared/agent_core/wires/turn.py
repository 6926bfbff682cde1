"""A client's turn, planned one way for every wire that takes input items (Responses, Chat Completions, AG-UI,
the UI stream): the agent and model, the client's function tools, the LLM options and the storage of a plan;
then the turn opened from it (the input's history written, the chat's lease taken).

Each wire checks its own request first (the Responses rules, a UI client's chat); what they share is here.
store:false swaps in `ephemeral_deps` (a request-scoped in-memory store): the same pipeline, nothing durable.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_core.container import RunDeps
from agent_core.domain.approval import APPROVAL_WIRES
from agent_core.domain.ids import new_chat_id, now_ms, sortable_id
from agent_core.domain.models import Chat, Message, Role
from agent_core.domain.text import chat_name, validate_message
from agent_core.errors import AgentError, InvalidRequest, RunInProgress
from agent_core.memory.calendar import to_ms
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.approvals import ApprovalMode, DecidedCall, undo
from agent_core.runtime.ephemeral import ephemeral_deps
from agent_core.runtime.reservation import create_reserving
from agent_core.runtime.turn import (
    PreparedTurn,
    TurnRequest,
    prepare_turn,
    turn_model,
    turn_zone,
)
from agent_core.tools.service import ToolService
from agent_core.usage.meter import Admission
from agent_core.wires.client_tools import TunedLlm, client_tool, request_agent, with_client_tools
from agent_core.wires.input import FunctionToolParam, InputMessage, ParsedInput


@dataclass(kw_only=True)
class TurnPlan:
    """Everything decided before the turn starts; building it writes nothing."""

    user_id: str
    deps: RunDeps  # request-scoped: the client's tools, the LLM options, ephemeral storage for store:false
    agent: AgentDefinition
    model: str | None  # a model name that overrides the agent's
    chat: Chat | None  # the conversation the turn continues
    parsed: ParsedInput
    client_tools: frozenset[str]
    instructions: str | None = None  # added to the turn's system prompt
    now: datetime | None = None
    public_base_url: str = ""
    deadline_ms: int | None = None  # a blocking answer's turn deadline; else the stream deadline
    approvals: ApprovalMode = "wait"  # how a call needing approval waits (`hand_over`: the run ends with it)
    decided: tuple[DecidedCall, ...] = ()  # approvals the request decided (`wires/responses/approvals.py`)
    client_run_id: str | None = None  # the client's own id for the run (AG-UI's runId)
    request_id: str | None = None  # the turn's request id (a replay of it answers with its run: AG-UI's runId)
    admission: Admission | None = None  # the turn's budget, reserved before the wire writes anything (`admit`)
    ui_message_id: str | None = None  # the UI message the run continues (the UI stream's answered message)


async def admit(plan: TurnPlan, *, prepare: bool = False) -> Admission:
    """The turn's budget and rate limit checked (429) before anything of the turn is written (a client's chat,
    the input's history, an approval's decision): reserved with a write of its own, or with `prepare` only
    prepared, for the turn's first write to carry (the client's chat it opens: `create_reserving`). Once per
    plan (a prepared reservation is written when asked again without `prepare`), and `prepare_turn` takes the
    admission as made. A turn that writes nothing before it begins needs none: its begin carries the reservation.

    Only a user with a limit has anything to reserve (and their profile is read here for the day's zone);
    otherwise the admission is left to `prepare_turn`, where it costs no call."""
    if plan.admission is None:
        deps, req = plan.deps, TurnRequest(user_id=plan.user_id, message="", model=plan.model, now=plan.now)
        plan.admission = Admission(deps.usage, req.user_id, to_ms(req.now) if req.now else now_ms())
        if deps.usage is not None and (await deps.usage.limits.get(req.user_id)).any:
            profile = await deps.memory_store.get_profile(req.user_id)
            model, tz = turn_model(deps, req, plan.agent), turn_zone(deps, req, profile)
            await (plan.admission.prepare(model, tz) if prepare else plan.admission.admit(model, tz))
    elif not prepare:
        await plan.admission.write_pending()
    return plan.admission


@dataclass(frozen=True)
class LlmOptions:
    """The request's model options (the Responses parameters; other wires map theirs onto them)."""

    temperature: float | None = None
    max_output_tokens: int | None = None
    tool_choice: Any = None  # "none" / "auto" / "required" / a function choice (an object with `name`)
    parallel_tool_calls: bool | None = None


def _agent(deps: RunDeps, model: str | None, chat: Chat | None) -> tuple[AgentDefinition, str | None]:
    """`model` names an agent, or the configured model the chat's agent (else the default agent) runs with."""
    keys = {a.key for a in deps.agents.all()}
    if model in keys:
        return deps.agents.get(model), None
    return deps.agents.get(chat.agent_key if chat else None), model


def plan_turn(
    deps: RunDeps,
    user_id: str,
    *,
    parsed: ParsedInput,
    chat: Chat | None,
    model: str | None,
    tools: list[FunctionToolParam],
    stored: bool,
    options: LlmOptions | None = None,
    instructions: str | None = None,
    now: datetime | None = None,
    public_base_url: str = "",
) -> TurnPlan:
    """The agent (`model` names one, else the chat's or the default), the client's tools added to it (only a
    function-mode agent can call them: else 400), the LLM options, and a request-scoped store unless `stored`."""
    options = options or LlmOptions()
    base, model = _agent(deps, model, chat)
    declared = [client_tool(t) for t in tools]
    if declared and base.mode != "function":
        raise InvalidRequest(f"agent {base.key!r} ({base.mode}) cannot call client function tools", param="tools")
    agent = request_agent(base, deps.tools.registry, declared)
    llm = TunedLlm(
        deps.llm,
        options.temperature,
        options.max_output_tokens,
        no_tools=options.tool_choice == "none",
        tool_choice=_chat_tool_choice(options.tool_choice),
        parallel_tool_calls=options.parallel_tool_calls,
    )
    run_deps = dataclasses.replace(
        deps, tools=with_client_tools(deps.tools, declared), llm=llm, agents=AgentCatalog([agent])
    )
    if not stored:
        run_deps = ephemeral_deps(run_deps, agent)
    return TurnPlan(
        user_id=user_id,
        deps=run_deps,
        agent=agent,
        model=model,
        chat=chat,
        parsed=parsed,
        client_tools=frozenset(t.name for t in tools),
        instructions=instructions,
        now=now,
        public_base_url=public_base_url,
    )


async def screen_input(plan: TurnPlan) -> None:
    """The agent's input guardrail over every user message the client's input holds (the new one and any
    history it brings), before anything is stored or the model called: masked in place, or refused
    (GuardrailIntervened). The input items kept for `input_items` are masked alike."""
    deps, agent = plan.deps, plan.agent
    guard = deps.guard_for(agent)
    if guard is None or not guard.checks("input"):
        return
    done: dict[str, str] = {}

    async def screen(text: str) -> str:
        if text not in done:
            done[text] = await deps.screen_input(agent, text)
        return done[text]

    parsed = plan.parsed
    for index, message in enumerate(parsed.messages):
        if message.role == Role.USER and message.content:
            parsed.messages[index] = dataclasses.replace(message, content=await screen(message.content))
    for item in parsed.items:
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            item["content"] = await screen(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = await screen(part["text"])


def gated_tools(agent: AgentDefinition, service: ToolService) -> list[str]:
    """The agent's tools an approval policy may gate (its own `approval`/`approvals`, AGENT_TOOL_APPROVAL)."""
    own = agent.approval_policies()
    return sorted(name for name in {*agent.tool_names, *own} if name in own or service.gated(name))


def refuse_approvals(agent: AgentDefinition, service: ToolService, wire: str, param: str = "model") -> None:
    """A wire that cannot ask a person (Chat Completions, store:false, the stateless chain stream) refuses an
    agent with a tool every call of which needs approval (`always`): `approval_unsupported` naming the wires
    that can, before any work. A tool whose policy asks only for some arguments (`when`) is offered: its turn
    runs with approvals `refuse`, where a call that would need approval does not run and the model reads why
    (`approval_unavailable`, naming these wires)."""
    own = agent.approval_policies()
    gated = [
        name for name in gated_tools(agent, service) if (name in own and own[name].always) or service.always_gated(name)
    ]
    if gated:
        raise InvalidRequest(
            f"agent {agent.key!r} has tools that need a person's approval ({', '.join(gated)}), which {wire} "
            f"cannot ask for; use {APPROVAL_WIRES}",
            param=param,
            code="approval_unsupported",
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


async def open_turn(plan: TurnPlan) -> PreparedTurn:
    """Write the input's history into the chat and take the chat's lease with the turn's first message.

    A turn continued only by function outputs writes them as history and stores no USER message: the
    model is called with the outputs last (`TurnRequest.continuation`). A turn that does not open takes back
    the approvals its request decided (`runtime/approvals.undo`): their calls never ran.
    """
    try:
        return await _open(plan)
    except BaseException:
        await asyncio.shield(undo(plan.deps.waits, plan.decided))
        raise


async def _open(plan: TurnPlan) -> PreparedTurn:
    deps = plan.deps
    prior, trigger = plan.parsed.split()
    continuation = trigger is None or trigger.role != Role.USER
    message = "" if continuation or trigger is None else trigger.content
    history = [*prior, trigger] if continuation and trigger is not None else prior
    if not continuation:
        try:
            validate_message(message, deps.settings.max_message_bytes)
        except AgentError as error:
            error.param = "input"
            raise
    chat = plan.chat
    if chat is not None and chat.active_run_id and (chat.lease_expires_at or 0) > now_ms():
        raise RunInProgress("another turn is running in this conversation")
    # The reservation rides with the turn's first write: the chat the input opens, else the turn's begin. Only
    # input written into an existing chat first is preceded by a reservation write of its own.
    admission = plan.admission
    if history:
        admission = await admit(plan, prepare=plan.chat is None)
    try:
        request = await _write_input(plan, message, history, continuation)
        prepared = await prepare_turn(deps, request, admission)
    except BaseException:
        if admission is not None:
            await asyncio.shield(admission.release())
        raise
    if not isinstance(prepared, PreparedTurn):  # a fresh request id is never a retry
        raise AgentError("unexpected replay of a stored result")
    if plan.instructions:
        prepared.extra_system.append(plan.instructions)
    return prepared


async def _write_input(plan: TurnPlan, message: str, history: list[InputMessage], continuation: bool) -> TurnRequest:
    """The input's history written into the chat (created when new); the turn's request."""
    deps, chat = plan.deps, plan.chat
    at = now_ms()
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
        assert plan.admission is not None  # prepared by `_open` for the chat opened here
        await create_reserving(deps, chat, None, plan.admission)
    if history:
        assert chat is not None
        await deps.chats.add_messages(chat.chat_id, [to_message(m, chat.chat_id, at) for m in history])
    return TurnRequest(
        user_id=plan.user_id,
        message=message,
        chat_id=chat.chat_id if chat else None,
        request_id=plan.request_id,
        model=plan.model,
        agent_key=plan.agent.key,
        now=plan.now,
        client_tools=plan.client_tools,
        public_base_url=plan.public_base_url,
        deadline_ms=plan.deadline_ms,
        continuation=continuation,
        input_checked=True,  # screen_input ran when the turn was planned
        approvals=plan.approvals,
        decided=plan.decided,
        client_run_id=plan.client_run_id,
        ui_message_id=plan.ui_message_id,
    )


def _chat_tool_choice(choice: object) -> str | dict[str, Any] | None:
    """The Responses `tool_choice` in Chat Completions form ("none" is done by offering no tools)."""
    if choice in ("auto", "required"):
        return str(choice)
    name = getattr(choice, "name", None)
    if name:
        return {"type": "function", "function": {"name": name}}
    return None
