"""GET /api/ap/agents: the agents a client can pick (chat function)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.context import AppContext

router = APIRouter(prefix="/api/ap", tags=["agents"], responses=error_responses(401))


@router.get("/agents")
async def agents(ctx: Annotated[AppContext, Depends(app_context)], _: Annotated[str, Depends(current_user)]) -> Any:
    items = [
        {
            "key": a.key,
            "name": a.name,
            "description": a.description,
            "mode": a.mode,
            "tools": a.tool_names + [f"{server.name}__*" for server in a.mcp_servers],
        }
        for a in ctx.deps.agents.all()
    ]
    return {"items": items}
