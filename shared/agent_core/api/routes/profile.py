"""The profile and sessions the user can see and end (chat function): see, set the zone of or erase the profile;
end a chat's open session now.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from agent_core.api.deps import app_context, current_user, request_now
from agent_core.api.openapi import error_responses
from agent_core.api.schemas import PathId, RequestBody
from agent_core.context import AppContext
from agent_core.domain.ids import now_ms
from agent_core.domain.models import Profile
from agent_core.errors import NotFound
from agent_core.memory.calendar import to_ms, valid_zone
from agent_core.runtime.session_end import end_session

router = APIRouter(prefix="/api/ap", tags=["memory"], responses=error_responses(401))

Ctx = Annotated[AppContext, Depends(app_context)]
User = Annotated[str, Depends(current_user)]


@router.post("/chat/{chat_id}/end", responses=error_responses(404, 413, 422))
async def end_chat_session(chat_id: PathId, request: Request, ctx: Ctx, user: User) -> Any:
    """End the chat's open session now; its summary is written in the background."""
    chat = await ctx.deps.chats.get_chat(chat_id, user)
    if chat is None:
        raise NotFound("chat not found", param="chatId", code="chat_not_found")
    override = request_now(request)
    job = await end_session(ctx.deps, chat, to_ms(override) if override else now_ms())
    await ctx.before_response()
    return {"chatId": chat_id, "ended": job is not None, "sessionId": job.session_id if job else None}


class ProfilePatch(RequestBody):
    timezone: str | None = None  # IANA name (Europe/Paris): the zone of the user's days, sessions and time queries


def _profile_out(ctx: AppContext, user: str, profile: Profile | None) -> dict[str, Any]:
    facts = profile.facts if profile else []
    return {
        "userId": user,
        "timezone": (profile.timezone if profile else None) or ctx.settings.default_timezone,
        "facts": [{"aspect": f.aspect, "key": f.key, "value": f.value, "sourceDate": f.source_date} for f in facts],
    }


@router.get("/profile")
async def get_profile(ctx: Ctx, user: User) -> Any:
    return _profile_out(ctx, user, await ctx.deps.memory_store.get_profile(user))


@router.patch("/profile", responses=error_responses(400, 413, 422))
async def patch_profile(body: ProfilePatch, ctx: Ctx, user: User) -> Any:
    """Change what the user may set on the profile: today its time zone (validated, 400 `invalid_timezone`)."""
    if body.timezone is None:
        return _profile_out(ctx, user, await ctx.deps.memory_store.get_profile(user))
    zone_name = valid_zone(body.timezone)
    return _profile_out(ctx, user, await ctx.deps.memory_store.set_profile_timezone(user, zone_name, now_ms()))


@router.delete("/profile", status_code=204)
async def delete_profile(ctx: Ctx, user: User) -> Response:
    """Erase everything remembered about the caller."""
    await ctx.deps.memory_store.delete_profile(user)
    return Response(status_code=204)
