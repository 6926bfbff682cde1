"""The one summarise function: every summary (rolling, session, daily) is made here."""

from __future__ import annotations

from agent_core.domain.models import Message, Role, Usage
from agent_core.llm.base import LlmClient, LlmRequest, complete_text

SUMMARY_INSTRUCTION = (
    "You maintain the memory of a conversation between a user and an assistant. "
    "Write a concise summary that keeps facts, decisions, names, numbers, open questions and the "
    "user's preferences. Merge the previous summary with the new messages; drop small talk. "
    "Answer with the summary text only."
)

_LABELS = {Role.USER: "User", Role.ASSISTANT: "Assistant", Role.TOOL: "Tool", Role.SYSTEM: "System"}


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


async def summarise(
    llm: LlmClient,
    model: str,
    messages: list[Message],
    *,
    previous: str = "",
    instruction: str = SUMMARY_INSTRUCTION,
) -> tuple[str, Usage]:
    """Summarise `messages`, folding in a previous summary; returns the text and the usage."""
    body = f"Previous summary:\n{previous}\n\n" if previous else ""
    body += f"New messages:\n{transcript(messages)}"
    request = LlmRequest(
        model=model,
        purpose="summarize",
        messages=[{"role": "system", "content": instruction}, {"role": "user", "content": body}],
    )
    text, usage = await complete_text(llm, request)
    return text.strip(), usage
