"""direct: one streamed Markdown answer, no tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_core.domain.events import Event
from agent_core.runtime.composer import answer_step

if TYPE_CHECKING:
    from agent_core.runtime.loop import TurnRunner


async def direct_strategy(r: TurnRunner) -> AsyncIterator[Event]:
    yield r.route("direct", "direct answer, no tools")
    async for event in answer_step(r, r.window()):
        yield event
