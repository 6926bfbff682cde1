"""The one summarise function: compaction, session and daily summaries and profile extraction all use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core.domain.models import Message, Role, Usage
from agent_core.llm.base import LlmClient, LlmRequest, complete_text
from agent_core.llm.json_answer import first_json_object

SpanKind = Literal["rolling", "session", "daily", "profile"]

_STYLE = (
    'Write 100-200 words in the conversation\'s language, in the third person ("the user ..."). Keep the '
    "user's needs, conclusions, decisions, names and numbers; drop small talk."
)
INSTRUCTIONS: dict[str, str] = {
    "rolling": (
        "You maintain the memory of a conversation between a user and an assistant. Merge the previous summary "
        f"with the new messages. {_STYLE}"
    ),
    "session": f"Summarise this conversation session. {_STYLE}",
    "daily": f"Summarise the user's day from these session summaries and messages. {_STYLE}",
    "profile": (
        "Extract durable facts about the user from this session summary: interests, budget, concerns, "
        "constraints, preferences. Only facts likely to stay true for weeks. Answer with JSON only: "
        '{"facts": [{"aspect": "interests|budget|concerns|constraints|preferences", '
        '"key": "<what it is about, 1-3 words>", "value": "<the fact>"}]}'
    ),
}
JSON_ANSWER = ' Answer with JSON only: {"summary": "<text>", "keyTopics": ["<3-5 short topics>"]}'

_LABELS = {Role.USER: "User", Role.ASSISTANT: "Assistant", Role.TOOL: "Tool", Role.SYSTEM: "System"}


@dataclass
class SpanSummary:
    summary: str
    key_topics: list[str] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


def transcript(messages: list[Message], max_chars_per_message: int = 2000) -> str:
    """Messages as labelled lines, each capped, for a summarisation prompt."""
    lines = []
    for m in messages:
        text = m.content
        if m.role == Role.ASSISTANT and m.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
            text = f"{text} [called {calls}]".strip()
        if m.role == Role.TOOL and m.tool_name:
            text = f"{m.tool_name} -> {text}"
        if text:
            lines.append(f"{_LABELS[m.role]}: {text[:max_chars_per_message]}")
    return "\n".join(lines)


def _parse(text: str, kind: SpanKind) -> SpanSummary:
    try:
        raw = first_json_object(text)
    except ValueError:
        return SpanSummary(summary=text.strip())
    if kind == "profile":
        facts = raw.get("facts")
        return SpanSummary(
            summary="", facts=[f for f in facts if isinstance(f, dict)] if isinstance(facts, list) else []
        )
    topics = raw.get("keyTopics") or raw.get("key_topics") or []
    return SpanSummary(
        summary=str(raw.get("summary") or text).strip(),
        key_topics=[str(t) for t in topics if str(t).strip()][:5] if isinstance(topics, list) else [],
    )


async def summarise(
    llm: LlmClient,
    model: str,
    span: list[Message] | str,
    *,
    kind: SpanKind = "rolling",
    previous: str = "",
) -> SpanSummary:
    """Summarise a span (messages, or text such as session summaries): summary + keyTopics (or profile facts)."""
    body = f"Previous summary:\n{previous}\n\n" if previous else ""
    body += span if isinstance(span, str) else f"Messages:\n{transcript(span)}"
    instruction = INSTRUCTIONS[kind] + ("" if kind == "profile" else JSON_ANSWER)
    request = LlmRequest(
        model=model,
        purpose="summarize",
        messages=[{"role": "system", "content": instruction}, {"role": "user", "content": body}],
    )
    text, usage = await complete_text(llm, request)
    result = _parse(text, kind)
    result.usage = usage
    return result
