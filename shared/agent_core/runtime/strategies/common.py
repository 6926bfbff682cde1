"""What every strategy shares: the raw-result holder of the chain's tool branch, and the closing message
when maxSteps runs out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent_core.domain.events import Event
from agent_core.runtime.replies import max_steps_reached
from agent_core.runtime.run_protocol import AgentRun


@dataclass
class RawResult:
    """A tool loop's unpolished final text (chain's tool branch), kept for the enhancement call.

    A loop given one streams none of its own text and does not answer; `text` stays None when the loop
    answered anyway (user_input, maxSteps).
    """

    text: str | None = None


async def close_at_max_steps(r: AgentRun) -> AsyncIterator[Event]:
    text = max_steps_reached(r.message, r.agent.max_steps)
    async for event in r.text_block(text):
        yield event
    r.answer(text, "max_steps")
