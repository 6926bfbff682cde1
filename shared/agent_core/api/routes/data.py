"""GET /api/ap/data: serve a chat's data file to its owner, or to anyone holding a valid data token."""

from __future__ import annotations

import html
from typing import Any, cast

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from agent_core.api.deps import app_context, current_user
from agent_core.api.openapi import error_responses
from agent_core.config import Settings
from agent_core.errors import AgentError, NotFound
from agent_core.store.blob import BlobStore
from agent_core.store.disposition import content_disposition
from agent_core.tools.data_path import data_file, data_key, normalize_data_path
from agent_core.tools.data_token import TOKEN_EXPIRED, DataTokenError

INLINE_MAX_BYTES = 4 * 1024 * 1024
PRESIGN_TTL_S = 60
_TRUE = frozenset({"1", "true", "yes", "on"})
_SAFE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, no-cache",
}

router = APIRouter(prefix="/api/ap", tags=["data"])

_FILE = {"content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}, "description": "The file"}
_REDIRECT = {"description": "Large files: a short-lived S3 link"}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: _FILE,
    302: _REDIRECT,
    **error_responses(400, 401, 403, 404, 422, 503),
}
# A browser (Accept: text/html) is shown a refused link as a small page instead of the JSON error.
_RESPONSES[403]["content"] = {**_RESPONSES[403]["content"], "text/html": {"schema": {"type": "string"}}}


class DataTokenRejected(AgentError):
    """A present but refused data token (403); `data.errorCode` says why."""

    code = "data_token_invalid"
    status = 403
    type = "permission_error"


class StorageUnavailable(AgentError):
    """The app context has no BlobStore."""

    code = "storage_unavailable"
    status = 503
    type = "server_error"


def blob_store(request: Request) -> BlobStore:
    """The app context's BlobStore."""
    blobs = app_context(request).deps.blobs
    if blobs is None:
        raise StorageUnavailable("data file storage is not configured")
    return cast(BlobStore, blobs)


def _not_found() -> NotFound:
    return NotFound("file not found", param="file")


def _wants_html(request: Request) -> bool:
    """A browser opening a link (it asks for text/html first); API clients get the JSON error."""
    accept = request.headers.get("accept", "").lower()
    return accept.split(",", 1)[0].split(";", 1)[0].strip() == "text/html"


def refused_page(error: DataTokenRejected, file: str) -> HTMLResponse:
    """The small page a browser shows for a refused link: what happened and what to do, every value escaped."""
    expired = (error.data or {}).get("errorCode") == TOKEN_EXPIRED
    title = "This link has expired" if expired else "This link is not valid"
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>The link to <code>{html.escape(file)}</code> cannot be used any more.</p>"
        "<p>Reopen the chat it came from: it shows a fresh link to the same file.</p>"
        f"<p><small>{html.escape(error.code)}: {html.escape(str((error.data or {}).get('errorCode', '')))}</small></p>"
        "</body></html>"
    )
    headers = {**_SAFE_HEADERS, "Content-Security-Policy": "default-src 'none'"}
    return HTMLResponse(body, status_code=error.status, headers=headers)


async def _authorise(request: Request, settings: Settings, chat_id: str, file: str, token: str | None) -> None:
    """A valid token is the authorisation; without one, the caller must own the chat (else 404)."""
    if token and settings.data_token_validation_enabled:
        try:
            # Always the wall clock: X-Agent-Now never revives an expired link.
            app_context(request).deps.data_links.verify(token, chat_id, file)
        except DataTokenError as exc:
            raise DataTokenRejected(
                f"data token refused: {exc}", param="t", data={"errorCode": exc.error_code}
            ) from exc
        return
    user = await current_user(request)
    if await app_context(request).deps.chats.get_chat(chat_id, user) is None:
        raise _not_found()


@router.get(
    "/data",
    response_class=Response,
    responses=_RESPONSES,
)
async def get_data(
    request: Request,
    file: str = "",
    t: str | None = None,
    download: str | None = None,
) -> Response:
    """Checks, in order: the path (400), the token or ownership (403 / 404), the object (404).

    A refused token is 403 `data_token_invalid` (JSON), or a small HTML page for a browser (Accept: text/html)."""
    chat_id, name = normalize_data_path(file)
    settings = app_context(request).settings
    try:
        await _authorise(request, settings, chat_id, data_file(chat_id, name), t)
    except DataTokenRejected as refused:
        if _wants_html(request):
            return refused_page(refused, data_file(chat_id, name))
        raise
    blobs = blob_store(request)
    key = data_key(chat_id, name)
    info = await blobs.head(key)
    if info is None:
        raise _not_found()
    attachment = (download or "").strip().lower() in _TRUE
    filename = name.rsplit("/", 1)[-1]
    # Embedded storage (files on this machine) has no URL a browser can reach: serve it directly.
    if info.size > INLINE_MAX_BYTES and settings.effective_storage != "embedded":
        url = await blobs.presign_get(key, PRESIGN_TTL_S, download_name=filename if attachment else None)
        return RedirectResponse(url, status_code=302, headers={"Cache-Control": "no-store"})
    blob = await blobs.get(key)
    if blob is None:
        raise _not_found()
    headers = {**_SAFE_HEADERS, "Content-Disposition": content_disposition(filename, attachment=attachment)}
    return Response(blob.body, media_type=blob.content_type or "application/octet-stream", headers=headers)
