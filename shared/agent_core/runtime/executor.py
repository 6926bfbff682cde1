"""Parallel tool execution: every call starts at once; results are yielded as they complete."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from agent_core.domain.models import ToolCall
from agent_core.tools.base import ToolContext
from agent_core.tools.service import ToolExecution, ToolService


async def execute_parallel(
    service: ToolService, calls: list[ToolCall], ctx: ToolContext
) -> AsyncGenerator[ToolExecution, None]:
    """Run `calls` concurrently; yield each governed execution in completion order."""
    tasks = [asyncio.create_task(service.execute(call, ctx)) for call in calls]
    try:
        for finished in asyncio.as_completed(tasks):
            yield await finished
    finally:
        for task in tasks:
            task.cancel()
