"""AG-UI (stream function): POST /api/ag-ui (the default agent) and POST /api/ag-ui/{agentKey}.

The body is AG-UI's RunAgentInput; the answer is its event stream (SSE, camelCase). `threadId` names a
chat of the caller (created on first use) whose stored history is authoritative: only the trailing
user and tool messages of `messages` are new input. The client's `tools` are frontend tools: a call
to one ends the run (TOOL_CALL_START/ARGS/END, then RUN_FINISHED) and its `tool` message in the next
run's input continues the conversation.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from ag_ui.core import RunAgentInput, ToolMessage, UserMessage
from fastapi import APIRouter, Depends, Path, Request

from agent_core.api.deps import app_context, current_user, link_base, request_now
from agent_core.api.openapi import EventStreamResponse, error_responses
from agent_core.api.sse import EventStream, stream_refusal, stream_run
from agent_core.context import AppContext
from agent_core.errors import InvalidRequest, TooManyRequests
from agent_core.runtime.pending import PendingTurn
from agent_core.wires.ag_ui import AgUiEncoder
from agent_core.wires.client_turn import start_client_turn
from agent_core.wires.input import function_tools

router = APIRouter(prefix="/api", tags=["ag-ui"], responses=error_responses(400, 401, 404, 409, 413, 422))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
AgentKey = Annotated[str, Path(min_length=1, max_length=64)]
MAX_THREAD_ID = 128


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = [getattr(part, "text", None) for part in content or []]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("only text content is supported", param=f"{where}.content")
    return "\n".join(cast(list[str], texts))


def _new_input(body: RunAgentInput) -> list[dict[str, Any]]:
    """The trailing user and tool messages as input items (the earlier ones are the stored history)."""
    start = len(body.messages)
    while start > 0 and body.messages[start - 1].role in ("user", "tool"):
        start -= 1
    items: list[dict[str, Any]] = []
    for n in range(start, len(body.messages)):
        message, where = body.messages[n], f"messages[{n}]"
        if isinstance(message, UserMessage):
            items.append({"type": "message", "role": "user", "content": _text(message.content, where)})
        elif isinstance(message, ToolMessage):
            output = _text(message.content, where)
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": output})
    if not items:
        raise InvalidRequest("messages must end with a user message or tool results", param="messages")
    return items


async def _run(body: RunAgentInput, agent_key: str | None, request: Request, ctx: AppContext, user: str) -> EventStream:
    if not body.thread_id or len(body.thread_id) > MAX_THREAD_ID:
        raise InvalidRequest(f"threadId must have 1 to {MAX_THREAD_ID} characters", param="threadId")
    tools = function_tools(body.tools or [])
    encoder = AgUiEncoder(body.thread_id, body.run_id, client_tools=frozenset(t.name for t in tools))
    try:
        prepared = await start_client_turn(
            ctx.deps,
            user,
            client_id=body.thread_id,
            input_items=_new_input(body),
            agent_key=agent_key,
            tools=tools,
            now=request_now(request),
            public_base_url=link_base(request),
        )
    except TooManyRequests as refusal:  # RUN_STARTED, then RUN_ERROR with the code: what AG-UI clients show
        return stream_refusal(ctx, encoder, refusal)
    turn_events = PendingTurn(prepared)
    return stream_run(ctx, encoder, turn_events.events(), turn=turn_events)


@router.post("/ag-ui", response_class=EventStreamResponse)
async def ag_ui_default(body: RunAgentInput, request: Request, ctx: Ctx, user: User) -> EventStream:
    """Run the default agent for an AG-UI client."""
    return await _run(body, None, request, ctx, user)


@router.post("/ag-ui/{agent_key}", response_class=EventStreamResponse)
async def ag_ui_agent(agent_key: AgentKey, body: RunAgentInput, request: Request, ctx: Ctx, user: User) -> EventStream:
    """Run the agent `agentKey` (404 `agent_not_found` when unknown) for an AG-UI client."""
    return await _run(body, agent_key, request, ctx, user)
