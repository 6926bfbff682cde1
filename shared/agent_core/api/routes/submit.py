"""POST /api/ap/submit: a browser answers a frontend tool (submit function; imports no LLM code)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.schemas import Body
from agent_core.context import AppContext

router = APIRouter(prefix="/api/ap", tags=["submit"])

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


class SubmitIn(Body):
    run_id: str = Field(min_length=1, max_length=64)
    tool_id: str = Field(min_length=1, max_length=128)
    params: dict[str, Any] = Field(default_factory=dict)


@router.post("/submit")
async def submit(body: SubmitIn, ctx: Ctx, user: User) -> dict[str, Any]:
    """200 accepted, or 200 unmatched (unknown run or tool, answered, expired, another user's): ids leak nothing."""
    accepted = await ctx.deps.store.submit_wait(body.run_id, body.tool_id, user, body.params, int(time.time()))
    return {"accepted": accepted, "status": "accepted" if accepted else "unmatched"}
