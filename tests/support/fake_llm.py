"""A scripted in-process LLM for unit and API tests: no network, no sleeps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment


@dataclass
class Reply:
    """One scripted model turn: text, tool calls, or an exception; optionally gated."""

    text: str = ""
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    error: Exception | None = None
    gate: asyncio.Event | None = None  # wait before finishing (after the first delta)
    hang: bool = False  # never finish (deadline tests)
    pieces: tuple[str, ...] = ()  # the answer as exactly these content deltas (instead of `text` in two halves)
    reasoning: tuple[str, ...] = ()  # reasoning deltas streamed before the answer


class ScriptedLlm:
    """Plays replies in order; when the script is empty it answers "ok". Records every request."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[LlmRequest] = []
        self.called = asyncio.Event()

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        self.requests.append(request)
        self.called.set()
        if request.purpose == "summarize":
            yield LlmDelta(content="summary of earlier messages")
            yield LlmDelta(finish_reason="stop")
            return
        reply = self.replies.pop(0) if self.replies else Reply(text="ok")
        if reply.error is not None:
            raise reply.error
        for piece in reply.reasoning:
            yield LlmDelta(reasoning=piece)
        for piece in reply.pieces:
            yield LlmDelta(content=piece)
        if reply.text:
            yield LlmDelta(content=reply.text[: len(reply.text) // 2 or 1])
            rest = reply.text[len(reply.text) // 2 or 1 :]
        else:
            rest = ""
        if reply.hang:
            await asyncio.Event().wait()
        if reply.gate is not None:
            await reply.gate.wait()
        if rest:
            yield LlmDelta(content=rest)
        for index, (call_id, name, args) in enumerate(reply.tool_calls):
            text = json.dumps(args)
            yield LlmDelta(tool_calls=[ToolCallFragment(index=index, id=call_id, name=name, arguments=text[:3])])
            yield LlmDelta(tool_calls=[ToolCallFragment(index=index, arguments=text[3:])])
        yield LlmDelta(finish_reason="tool_calls" if reply.tool_calls else "stop")
        yield LlmDelta(usage=Usage(prompt_tokens=10, completion_tokens=5))
