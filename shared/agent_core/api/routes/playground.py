"""The playground: a static page at `/` (vanilla JS, no build step, no CDN) that talks to /api/ap/*.

Its files ship inside the package (`agent_core/api/static/`), so the Lambda layer carries them too. The
local server always serves it; the chat function only with AGENT_PLAYGROUND_ENABLED. The page calls the API
where it was served from, or at AGENT_PUBLIC_BASE_URL when that is set (a page on the chat function's URL
then reaches every route through the gateway; that origin must be in AGENT_CORS_ORIGINS).
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from agent_core.api.deps import app_context
from agent_core.context import AppContext
from agent_core.errors import NotFound

router = APIRouter(include_in_schema=False)

_ASSETS = {
    "playground.js": "text/javascript; charset=utf-8",
    "playground.css": "text/css; charset=utf-8",
}
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def _policy(api_origin: str) -> str:
    """The page loads only its own files (no inline script, no other origin) and calls only the API."""
    connect = f"'self' {api_origin}".rstrip()
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {connect}; frame-ancestors 'none'; base-uri 'self'"
    )


def _read(name: str) -> bytes:
    return resources.files("agent_core.api").joinpath("static", name).read_bytes()


@router.get("/")
async def page(ctx: Annotated[AppContext, Depends(app_context)]) -> Response:
    base = ctx.settings.public_base_url.rstrip("/")
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    body = _read("playground.html").decode().replace("<body>", f'<body data-api-base="{html.escape(base)}">', 1)
    headers = {**_HEADERS, "Content-Security-Policy": _policy(origin)}
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/playground/{name}")
async def asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound("no such playground file", param="name", code="not_found")
    return Response(_read(name), media_type=media_type, headers={**_HEADERS, "Content-Security-Policy": _policy("")})
