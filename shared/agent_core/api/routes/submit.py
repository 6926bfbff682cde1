"""POST /api/ap/submit: a browser answers a frontend tool (submit function; imports no LLM code)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import RequestBody
from agent_core.context import AppContext
from agent_core.domain.models import RunStatus
from agent_core.domain.text import utf8_size
from agent_core.errors import PayloadTooLarge

router = APIRouter(prefix="/api/ap", tags=["submit"])

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]
UNMATCHED = {"accepted": False, "status": "unmatched"}


class SubmitIn(RequestBody):
    run_id: str = Field(min_length=1, max_length=64)
    tool_id: str = Field(min_length=1, max_length=128)
    params: dict[str, Any] = Field(default_factory=dict)


@router.post("/submit", responses=error_responses(401, 413, 422))
async def submit(body: SubmitIn, ctx: Ctx, user: User) -> dict[str, Any]:
    """200 accepted; 200 `accepted: false` with the run's status when it ended or is being cancelled; else
    200 unmatched (unknown run or tool, answered, expired, another user's): ids leak nothing."""
    limit = ctx.settings.max_message_bytes
    if utf8_size(json.dumps(body.params, ensure_ascii=False), "params") > limit:
        raise PayloadTooLarge(f"params exceed {limit} bytes (UTF-8 JSON)", param="params")
    now_s = int(time.time())
    # The WAIT item's condition decides (a cancel closes the run's waits after flagging the run), so the
    # answer that resumes a run costs one UpdateItem; only a refused submit reads why.
    if await ctx.deps.waits.submit_wait(body.run_id, body.tool_id, user, body.params, now_s):
        return {"accepted": True, "status": "accepted"}
    pointer = await ctx.deps.turns.get_run_pointer(body.run_id, now_s)
    if pointer is None or pointer.user_id != user:
        return UNMATCHED
    run = await ctx.deps.turns.get_run(pointer.chat_id, pointer.run_id)
    if run is None:
        return UNMATCHED
    if run.status != RunStatus.RUNNING:
        return {"accepted": False, "status": run.status.value}
    if run.cancel_requested:
        return {"accepted": False, "status": "cancelling"}
    return UNMATCHED
