"""What every strategy shares: the raw-result holder of the chain's tool branch, and the closing message
when maxSteps runs out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent_core.domain.events import Event
from agent_core.runtime.run_protocol import AgentRun


@dataclass
class RawResult:
    """A tool loop's unpolished final text (chain's tool branch), kept for the enhancement call.

    A loop given one streams none of its own text and does not answer; `text` stays None when the loop
    answered anyway (user_input, maxSteps).
    """

    text: str | None = None


def max_steps_message(r: AgentRun) -> str:
    steps = r.agent.max_steps
    if any("\u3400" <= ch <= "\u9fff" for ch in r.message):
        return f"（已达到最多 {steps} 步，仍未得到最终答案。请把问题拆小一些，或换一种问法。）"
    return f"(Stopped after {steps} steps without a final answer. Try a narrower question or split it up.)"


async def close_at_max_steps(r: AgentRun) -> AsyncIterator[Event]:
    text = max_steps_message(r)
    async for event in r.text_block(text):
        yield event
    r.answer(text, "max_steps")
