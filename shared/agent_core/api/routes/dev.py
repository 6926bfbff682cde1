"""Dev-stage routes that run the scheduled jobs now (X-Agent-Now honoured) over the caller's data.

They exist only where `Settings.dev_features` holds (AGENT_STAGE=dev, never in Lambda): elsewhere 404.
They need an authenticated caller like every route, and act only on that caller's chats and days.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from agent_core.api.deps import app_context, current_user, request_now
from agent_core.api.openapi import error_responses
from agent_core.context import AppContext
from agent_core.errors import NotFound
from agent_core.jobs.handlers import ScheduledJob

router = APIRouter(prefix="/api/dev", tags=["dev"], responses=error_responses(401, 404))

Ctx = Annotated[AppContext, Depends(app_context)]


def dev_stage(request: Request) -> None:
    """404 unless the dev features are on: checked before the caller, so nothing here exists elsewhere."""
    if not app_context(request).settings.dev_features:
        raise NotFound("Not Found")


User = Annotated[str, Depends(current_user)]
DevStage = Depends(dev_stage)


async def _run(request: Request, ctx: AppContext, user: str, name: ScheduledJob) -> dict[str, Any]:
    now = request_now(request) or datetime.now(UTC)
    report = await ctx.run_scheduled(name, now, user)  # returns once the enqueued work has finished
    return {"job": name, "now": now.isoformat(), "report": asdict(report)}


@router.post("/jobs/idle-sessions", dependencies=[DevStage])
async def idle_sessions(request: Request, ctx: Ctx, user: User) -> dict[str, Any]:
    """Close the caller's idle sessions and expire their dead runs as the 5-minute schedule would, now."""
    return await _run(request, ctx, user, "idle_sessions")


@router.post("/jobs/daily-summary", dependencies=[DevStage])
async def daily_summary(request: Request, ctx: Ctx, user: User) -> dict[str, Any]:
    """Summarise the caller's user-days that just closed as the hourly schedule would, now."""
    return await _run(request, ctx, user, "daily_summary")
