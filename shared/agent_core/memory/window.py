"""The prompt window: system prompt + rolling summary + the uncovered NORMAL messages, under a token budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_core.domain.models import Kind, Message, Role, Summary
from agent_core.llm.tokens import estimate_message, estimate_messages

SUMMARY_HEADER = "Summary of the earlier conversation:"
TRIM_MARKER = "…[truncated]"


@dataclass
class Window:
    messages: list[dict[str, Any]]
    estimated_tokens: int
    dropped_units: int


def trim_tool_output(content: str, limit: int) -> str:
    """Tool outputs can be large; the window keeps their head only."""
    return content if len(content) <= limit else content[:limit] + TRIM_MARKER


def to_chat_message(message: Message, tool_output_chars: int) -> dict[str, Any]:
    """One stored message in OpenAI chat format."""
    if message.role == Role.USER:
        return {"role": "user", "content": message.content}
    if message.role == Role.TOOL:
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": trim_tool_output(message.content, tool_output_chars),
        }
    if message.role == Role.SYSTEM:
        return {"role": "system", "content": message.content}
    out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in message.tool_calls
        ]
    return out


def group_units(messages: list[Message]) -> list[list[Message]]:
    """Group messages so an assistant tool-call message and its results are never split.

    A unit whose tool calls lack results (a run that died mid-step) and results without their
    call are dropped: providers reject both.
    """
    units: list[list[Message]] = []
    i = 0
    normal = [m for m in messages if m.kind == Kind.NORMAL]
    while i < len(normal):
        message = normal[i]
        if message.role == Role.ASSISTANT and message.tool_calls:
            wanted = {c.id for c in message.tool_calls}
            unit = [message]
            i += 1
            while i < len(normal) and normal[i].role == Role.TOOL:
                unit.append(normal[i])
                i += 1
            answered = {m.tool_call_id for m in unit[1:]}
            if wanted <= answered:
                units.append([unit[0], *(m for m in unit[1:] if m.tool_call_id in wanted)])
            continue
        if message.role != Role.TOOL:
            units.append([message])
        i += 1
    return units


def summary_message(summary: Summary | None) -> list[dict[str, Any]]:
    if summary is None or not summary.content:
        return []
    return [{"role": "system", "content": f"{SUMMARY_HEADER}\n{summary.content}"}]


def build_window(
    system_prompt: str,
    summary: Summary | None,
    messages: list[Message],
    *,
    max_tokens: int,
    tool_output_chars: int,
    extra_system: list[str] | None = None,
) -> Window:
    """Newest units first until the budget is spent; the newest unit is always kept."""
    prefix: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    prefix += [{"role": "system", "content": block} for block in extra_system or [] if block]
    prefix += summary_message(summary)
    budget = max_tokens - estimate_messages(prefix)
    units = group_units(messages)
    kept: list[list[dict[str, Any]]] = []
    used = 0
    for unit in reversed(units):
        chat = [to_chat_message(m, tool_output_chars) for m in unit]
        cost = sum(estimate_message(m) for m in chat)
        if kept and used + cost > budget:
            break
        kept.append(chat)
        used += cost
    body = [m for unit in reversed(kept) for m in unit]
    return Window(
        messages=prefix + body,
        estimated_tokens=estimate_messages(prefix) + used,
        dropped_units=len(units) - len(kept),
    )
