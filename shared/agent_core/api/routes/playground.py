"""The playground: a static page at `/` (vanilla JS, no build step, no CDN) that talks to /api/ap/*.

Its files ship inside the package (`agent_core/api/static/`), so the Lambda layer carries them too. The
local server always serves it; the chat function only with AGENT_PLAYGROUND_ENABLED.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from agent_core.errors import NotFound

router = APIRouter(include_in_schema=False)

_ASSETS = {
    "playground.js": "text/javascript; charset=utf-8",
    "playground.css": "text/css; charset=utf-8",
}
# The page loads only its own files: no inline script, no other origin.
_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'self'"
    ),
}


def _read(name: str) -> bytes:
    return resources.files("agent_core.api").joinpath("static", name).read_bytes()


@router.get("/")
async def page() -> Response:
    return Response(_read("playground.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/playground/{name}")
async def asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound("no such playground file", param="name", code="not_found")
    return Response(_read(name), media_type=media_type, headers=_HEADERS)
