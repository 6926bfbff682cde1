"""chain: an intent analysis call picks direct or react, that branch runs, then the answer is enhanced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.runtime.composer import enhance
from agent_core.runtime.decisions import DecisionError, parse_intent

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner

INTENT_PROMPT = (
    "Decide how to handle the user's last message. Answer with ONE JSON object: "
    '{"mode": "direct" | "react", "reason": "<short reason>"}. '
    "Use react when tools are needed ({tools}); direct when you can answer from knowledge and the conversation."
)


async def chain_strategy(r: TurnRunner) -> AsyncIterator[Event]:
    from agent_core.runtime.strategies.react import react_loop

    names = ", ".join(r.toolset.names) or "none available"
    messages = [*r.window(include_run=False), {"role": "system", "content": INTENT_PROMPT.replace("{tools}", names)}]
    async for event in r.model_step(messages, forward_content=False):
        yield event
    assert r.last is not None
    try:
        mode, reason = parse_intent(r.last.text())
    except DecisionError as error:
        mode, reason = "react", f"intent unclear ({error}); using react"
    yield r.route("chain", f"{mode}: {reason}".strip())
    if mode == "direct":
        async for event in r.model_step(r.window(), forward_content=False):
            yield event
        assert r.last is not None
        r.raw_result = r.last.text()
    else:
        async for event in react_loop(r, emit_final=False):
            yield event
        if r.raw_result is None:  # the loop already answered (user_input or max steps)
            return
    async for event in enhance(r, r.raw_result or ""):
        yield event
