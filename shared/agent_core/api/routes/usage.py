"""GET /api/ap/usage: the caller's usage ledger over a range of their local days, their budgets and what
remains today (chat function)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from agent_core.api.deps import app_context, current_user, request_now, request_timezone
from agent_core.api.openapi import error_responses
from agent_core.context import AppContext
from agent_core.errors import ServiceUnavailable
from agent_core.memory.calendar import zone
from agent_core.usage.report import usage_report

router = APIRouter(prefix="/api/ap", tags=["usage"], responses=error_responses(401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
FromDay = Annotated[str | None, Query(alias="from", max_length=10, description="yyyy-mm-dd, the first local day")]
ToDay = Annotated[str | None, Query(max_length=10, description="yyyy-mm-dd, the last local day (inclusive)")]


@router.get("/usage", responses=error_responses(422))
async def usage(request: Request, ctx: Ctx, user: User, from_: FromDay = None, to: ToDay = None) -> Any:
    """Tokens, runs, tool calls and estimated cost per local day and model (the last 7 days by default)."""
    meter = ctx.deps.usage
    if meter is None:
        raise ServiceUnavailable("usage is not recorded here")
    named = request_timezone(request, None)
    if named is None:
        profile = await ctx.deps.memory_store.get_profile(user)
        named = profile.timezone if profile else None
    tz = zone(named, ctx.settings.default_timezone)
    now = request_now(request) or datetime.now(UTC)
    return await usage_report(meter, user, from_, to, tz, now)
