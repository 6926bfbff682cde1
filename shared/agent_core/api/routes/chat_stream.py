"""POST /api/chat/stream: the stateless chain endpoint; native SSE with an ephemeral chat; nothing stored.

Every agent runs the chain here (intent -> direct answer, or the tool branch then enhancement), whatever
its own mode; the request picks how the tool branch runs (`strategy`: prompt, the default, or function),
`maxSteps` (1-50; default the agent's, 8 unless it sets one) and `reactVerbose`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import Field, StrictInt

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.schemas import Body, RequestBody
from agent_core.api.sse import EventStream, stream_run
from agent_core.context import AppContext
from agent_core.domain.models import Role
from agent_core.domain.text import utf8_size, validate_message
from agent_core.errors import InvalidRequest, PayloadTooLarge
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.ephemeral import ephemeral_deps, seed_chat
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.tools.registry import ToolRegistry
from agent_core.wires.native import NativeEncoder
from agent_core.wires.turn import refuse_approvals

router = APIRouter(prefix="/api/chat", tags=["chain"], responses=error_responses(401, 413, 422))


def without_frontend_tools(agent: AgentDefinition, registry: ToolRegistry) -> dict[str, object]:
    """The agent's tools minus frontend tools: nothing stored means no submit could ever reach the run's wait.

    UI actions stay (the run does not wait for them); a built-in frontend tool such as `ask_user` goes too.
    """
    kept = [ref for ref in agent.tools if (tool := registry.get(ref.name)) is None or tool.kind != "frontend"]
    return {"tools": kept, "frontend_tools": []}


class ChainMessage(Body):
    role: Literal["user", "assistant", "system"]
    content: str


MAX_STEPS = 50


class ChainIn(RequestBody):
    messages: list[ChainMessage] = Field(min_length=1)  # at most AGENT_MAX_INPUT_ITEMS, each AGENT_MAX_MESSAGE_BYTES
    agent_name: str | None = Field(None, max_length=64)
    strategy: Literal["prompt", "function"] = "prompt"
    max_steps: StrictInt | None = None  # range-checked in the route: out of range is a 400, never clamped
    react_verbose: bool | None = None


class OptionOutOfRange(InvalidRequest):
    code = "option_out_of_range"
    status = 400


def chain_agent(agent: AgentDefinition, body: ChainIn) -> AgentDefinition:
    """The agent as this endpoint runs it: mode chain, with the request's options."""
    changes: dict[str, object] = {"mode": "chain", "strategy": body.strategy}
    if body.max_steps is not None:
        if not 1 <= body.max_steps <= MAX_STEPS:
            message = f"maxSteps must be between 1 and {MAX_STEPS}, got {body.max_steps}"
            raise OptionOutOfRange(message, param="maxSteps")
        changes["max_steps"] = body.max_steps
    if body.react_verbose is not None:
        changes["react_verbose"] = body.react_verbose
    return agent.model_copy(update=changes)


@router.post("/stream", response_class=EventStreamResponse, responses=error_responses(400, 404))
async def chain_stream(
    body: ChainIn, ctx: Annotated[AppContext, Depends(app_context)], user: Annotated[str, Depends(current_user)]
) -> EventStream:
    settings = ctx.settings
    if len(body.messages) > settings.max_input_items:
        raise InvalidRequest(
            f"messages has more than {settings.max_input_items} items", param="messages", code="too_many_items"
        )
    for n, message in enumerate(body.messages[:-1]):  # the last one is checked as the turn's message
        if utf8_size(message.content, f"messages[{n}].content") > settings.max_message_bytes:
            raise PayloadTooLarge(
                f"message exceeds {settings.max_message_bytes} bytes (UTF-8)", param=f"messages[{n}].content"
            )
    if body.messages[-1].role != "user":
        raise InvalidRequest("the last message must be the user's", param="messages")
    validate_message(body.messages[-1].content, settings.max_message_bytes)
    agent = ctx.deps.agents.get(body.agent_name, param="agentName")
    # Nothing is stored here, so a frontend tool's submit could never match: none is offered.
    agent = chain_agent(agent.model_copy(update=without_frontend_tools(agent, ctx.deps.tools.registry)), body)
    # Nor could an approval's answer: an agent with a tool that always asks is refused (approval_unsupported);
    # a call that a conditional policy would put to a person does not run (approval_unavailable).
    refuse_approvals(agent, ctx.deps.tools, "the stateless /api/chat/stream", param="agentName")
    deps = ephemeral_deps(ctx.deps, agent)
    history = [(Role(m.role.upper()), m.content) for m in body.messages[:-1]]
    chat = await seed_chat(deps.chats, user, agent.key, history)
    request = TurnRequest(user_id=user, chat_id=chat.chat_id, message=body.messages[-1].content, approvals="refuse")
    prepared = await prepare_turn(deps, request)
    assert isinstance(prepared, PreparedTurn)
    return stream_run(ctx, NativeEncoder(), TurnRunner(prepared).events())
