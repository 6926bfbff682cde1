"""A Chat Completions request as a turn: planned as a stateless Responses request, its events chat chunks.

Planning (`plan_response` with store:false) and the turn (`open_turn`, `TurnRunner`) are the Responses
API's: the same governance, limits and request-scoped in-memory store; only the encoder differs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from agent_core.container import RunDeps
from agent_core.domain.ids import sortable_id
from agent_core.errors import AgentError
from agent_core.runtime.blocking import run_failure
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn
from agent_core.store.responses import ResponseStore
from agent_core.wires.chat_completions.encoder import ChatCompletionsEncoder
from agent_core.wires.chat_completions.request import ChatCompletionCreate, as_response_request
from agent_core.wires.client_tools import TunedLlm
from agent_core.wires.encoder import encoded
from agent_core.wires.responses.plan import plan_response
from agent_core.wires.turn import open_turn

Wire = dict[str, Any]


@dataclass
class ChatCompletionRun:
    """A completion whose turn holds its (request-scoped) chat's lease."""

    prepared: PreparedTurn
    encoder: ChatCompletionsEncoder

    async def chunks(self) -> AsyncGenerator[Wire | str, None]:
        """The role chunk, then the run's chunks: the finish (and usage) chunk then `[DONE]`, or an error last."""
        envelopes = cast(AsyncGenerator[Envelope, None], TurnRunner(self.prepared).events())
        async with contextlib.aclosing(encoded(self.encoder, envelopes)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def completion(self) -> Wire:
        """Run to the end: the `chat.completion` object, or the run's error raised (an error status)."""
        async with contextlib.aclosing(self.chunks()) as chunks:
            async for _ in chunks:
                pass
        if self.encoder.error is not None:
            raise run_failure(self.encoder.error)
        return self.encoder.completion()


async def start_chat_completion(
    deps: RunDeps,
    responses: ResponseStore,
    body: ChatCompletionCreate,
    user_id: str,
    *,
    now: datetime | None = None,
    public_base_url: str = "",
    deadline_ms: int | None = None,
) -> ChatCompletionRun:
    """Check the request and take the turn's lease; every 4xx answer comes from here, before any output.

    `deadline_ms` is a buffered completion's turn deadline (a stream has the stream deadline)."""
    body.check()
    try:
        plan = await plan_response(
            deps, responses, as_response_request(body), user_id, now=now, public_base_url=public_base_url
        )
        if body.stop_sequences and isinstance(plan.deps.llm, TunedLlm):
            llm = dataclasses.replace(plan.deps.llm, stop=body.stop_sequences)
            plan.deps = dataclasses.replace(plan.deps, llm=llm)
        plan.deadline_ms = deadline_ms
        prepared = await open_turn(plan)
    except AgentError as error:
        if error.param and error.param.startswith("input"):  # the Responses input is this request's messages
            error.param = "messages"
        raise
    encoder = ChatCompletionsEncoder(
        f"chatcmpl-{sortable_id()}",
        created=int(time.time()),
        model=body.model,
        client_tools=body.client_tools,
        include_usage=body.include_usage,
    )
    return ChatCompletionRun(prepared, encoder)
