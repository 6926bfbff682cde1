"""The one error mapper: every route answers `{"error": {"code", "message", "type", "param"}}`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent_core.errors import AgentError
from agent_core.observability import logger

_UNPARSABLE_BODY = "There was an error parsing the body"  # FastAPI's HTTPException for undecodable bodies
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 413: "request_too_large"}


def error_body(code: str, message: str, type_: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "type": type_, "param": param}}


def _is_openai_route(request: Request) -> bool:
    return request.url.path.startswith("/v1/")


def _param(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) if parts else ("body" if loc and loc[0] == "body" else None)


async def _agent_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AgentError)
    status = exc.status
    if _is_openai_route(request) and status == 422:
        status = 400
    body = error_body(exc.code, exc.message, exc.type, exc.param)
    if exc.data is not None:
        body["data"] = exc.data
    retry_after = getattr(exc, "retry_after_s", None)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    if not exc.retry_safe:
        headers["x-should-retry"] = "false"
    return JSONResponse(body, status_code=status, headers=headers or None)


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    loc = tuple(first.get("loc", ()))
    kind = first.get("type", "")
    param: str | None
    code = "invalid_request"
    media = _media_type(request)
    if loc == ("body",) and not media.endswith("json"):
        # FastAPI reads a body as JSON only when it says so; otherwise "Input should be a valid dictionary".
        code, param = "invalid_content_type", "body"
        message = (
            "the request body must be a JSON object sent with Content-Type: application/json "
            f"(this request's Content-Type: {media or 'none'})"
        )
    elif kind == "json_invalid":
        message, param = "request body is not valid JSON", "body"
    elif kind == "extra_forbidden":
        code, param = "unknown_field", _param(loc)
        message = f"unknown field {param!r} (field names are camelCase, e.g. chatId)"
    else:
        param = _param(loc)
        message = f"{param or 'request'}: {first.get('msg', 'invalid value')}"
    status = 400 if _is_openai_route(request) else 422
    return JSONResponse(error_body(code, message, "invalid_request_error", param), status_code=status)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
        # Bytes that are not even text: the same answer as any other body that is not JSON.
        status = 400 if _is_openai_route(request) else 422
        body = error_body("invalid_request", "request body is not valid JSON", "invalid_request_error", "body")
        return JSONResponse(body, status_code=status)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    return JSONResponse(error_body(code, str(exc.detail), kind), status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error", extra={"path": request.url.path})
    return JSONResponse(error_body("internal_error", "internal error", "server_error"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(AgentError, _agent_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
