"""Chat messages as OpenAI conversation items, and the API's cursor-paged lists."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_core.domain.models import Kind, Message, Role, ToolCall
from agent_core.wires.approval_answers import approval_request_id

Wire = dict[str, Any]


def mcp_names(name: str, default_label: str) -> tuple[str, str]:
    """(server_label, tool name) of a server-side tool: MCP tools are named `{server}__{tool}`."""
    label, _, remote = name.partition("__")
    return (label, remote) if remote else (default_label, name)


def _message(message: Message, role: str, part_type: str) -> Wire:
    part: Wire = {"type": part_type, "text": message.content}
    if part_type == "output_text":
        part["annotations"] = []
    return {"id": f"msg_{message.id}", "type": "message", "role": role, "status": "completed", "content": [part]}


def _ran(owner: Message, result: Message | None) -> bool:
    """A call whose result a run wrote ran server-side: in the run that made it, or (handed over for approval)
    in the run of the request that decided it. A client's output is input (no run)."""
    return result is not None and owner.run_id is not None and result.run_id is not None


def unanswered_calls(messages: list[Message]) -> list[tuple[str, str]]:
    """(run id, call id) of each call of a run with no result yet: awaiting a client's output, or an approval."""
    answered = {m.tool_call_id for m in messages if m.role == Role.TOOL}
    calls = [(m.run_id, c.id) for m in messages if m.role == Role.ASSISTANT and m.run_id for c in m.tool_calls]
    return [(run_id, call_id) for run_id, call_id in calls if call_id not in answered]


def _call(call: ToolCall, owner: Message, result: Message | None, server_label: str, asked: frozenset[str]) -> Wire:
    """A call that ran server-side is an mcp_call (with the approval request a later run's call answered), one
    that awaits approval (`asked`) its mcp_approval_request; the client answered the others."""
    if result is None and call.id in asked and owner.run_id is not None:
        label, tool = mcp_names(call.name, server_label)
        request = {"id": approval_request_id(owner.run_id, call.id), "type": "mcp_approval_request"}
        return {**request, "server_label": label, "name": tool, "arguments": call.arguments}
    if result is not None and _ran(owner, result):
        label, tool = mcp_names(call.name, server_label)
        item: Wire = {"id": f"mcp_{call.id}", "type": "mcp_call", "server_label": label, "name": tool}
        if owner.run_id is not None and result.run_id != owner.run_id:
            item["approval_request_id"] = approval_request_id(owner.run_id, call.id)
        return {**item, "arguments": call.arguments, "output": result.content, "status": "completed"}
    item = {"id": f"fc_{call.id}", "type": "function_call", "call_id": call.id, "name": call.name}
    return {**item, "arguments": call.arguments, "status": "completed"}


def conversation_items(
    messages: list[Message], server_label: str = "agent", asked: frozenset[str] = frozenset()
) -> list[Wire]:
    """A chat's messages (oldest first) as conversation items; summaries left out. `asked`: the calls handed
    over for approval and not run yet."""
    normal = [m for m in messages if m.kind == Kind.NORMAL]
    results = {m.tool_call_id: m for m in normal if m.role == Role.TOOL and m.tool_call_id}
    owners = {call.id: m for m in normal if m.role == Role.ASSISTANT for call in m.tool_calls}
    items: list[Wire] = []
    for message in normal:
        if message.role == Role.USER:
            items.append(_message(message, "user", "input_text"))
        elif message.role == Role.SYSTEM:
            items.append(_message(message, "system", "input_text"))
        elif message.role == Role.ASSISTANT:
            if message.content:
                items.append(_message(message, "assistant", "output_text"))
            items += [_call(c, message, results.get(c.id), server_label, asked) for c in message.tool_calls]
        elif message.role == Role.TOOL and message.tool_call_id:
            owner = owners.get(message.tool_call_id)
            if owner is not None and _ran(owner, message):
                continue  # shown inside its mcp_call
            item = {"id": f"fco_{message.id}", "type": "function_call_output", "call_id": message.tool_call_id}
            items.append({**item, "output": message.content, "status": "completed"})
    return items


class ListQuery(BaseModel):
    """The query of every paged list of the API (`?after=&limit=&order=`), as OpenAI defines it."""

    after: str | None = None
    limit: int = Field(20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"


def list_page(items: list[Wire], query: ListQuery) -> Wire:
    """`{object: list, data, first_id, last_id, has_more}` over items oldest first, paged after an item id."""
    after, limit = query.after, query.limit
    ordered = items if query.order == "asc" else list(reversed(items))
    if after is not None:
        ids = [str(item.get("id")) for item in ordered]
        ordered = ordered[ids.index(after) + 1 :] if after in ids else []
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0].get("id") if page else None,
        "last_id": page[-1].get("id") if page else None,
        "has_more": len(ordered) > limit,
    }
