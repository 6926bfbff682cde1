"""Local-only routes that run the scheduled jobs now (X-Agent-Now honoured) and wait for their work."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from agent_core.api.deps import app_context, request_now
from agent_core.context import AppContext
from agent_core.errors import NotFound
from agent_core.jobs import entry

router = APIRouter(prefix="/api/dev", tags=["dev"])

Ctx = Annotated[AppContext, Depends(app_context)]


async def _run(request: Request, ctx: AppContext, name: entry.ScheduledJob) -> dict[str, Any]:
    if ctx.settings.in_lambda:
        raise NotFound("Not Found")
    now = request_now(request) or datetime.now(UTC)
    report = await entry.run_scheduled(ctx, name, now)  # returns once the enqueued work has finished
    return {"job": name, "now": now.isoformat(), "report": entry.report_dict(report)}


@router.post("/jobs/idle-sessions")
async def idle_sessions(request: Request, ctx: Ctx) -> dict[str, Any]:
    """Close idle sessions and expire leases as the 5-minute schedule would, now."""
    return await _run(request, ctx, "idle_sessions")


@router.post("/jobs/daily-summary")
async def daily_summary(request: Request, ctx: Ctx) -> dict[str, Any]:
    """Summarise the user-days that just closed as the hourly schedule would, now."""
    return await _run(request, ctx, "daily_summary")
