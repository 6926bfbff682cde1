"""What the OpenAPI document says about errors and event streams (one error schema for every route)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

ERROR_REF = "#/components/schemas/ErrorBody"
_DESCRIPTIONS = {
    400: "Invalid request (`/v1/*` routes answer body errors with 400, as OpenAI does)",
    401: "Missing or invalid credentials",
    403: "Refused (e.g. an invalid data token)",
    404: "Not found, or not the caller's",
    409: "Conflict (e.g. `run_in_progress`)",
    410: "Gone: `resume_unavailable` (a run's event log expired or is incomplete; its replay shows the run)",
    413: "Too large: `request_too_large` (the body), `message_too_large` (a message or item), `instructions_too_large`",
    422: "Invalid request",
    502: "The model failed (`llm_unavailable`)",
    503: "A service is unavailable; retry later",
    504: "The turn ran out of time before the model finished (`deadline_exceeded`)",
}


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, machine-readable error code")
    message: str
    type: str = Field(description="`invalid_request_error`, `authentication_error`, `server_error`...")
    param: str | None = None


class ErrorBody(BaseModel):
    """Every error answer: `{"error": {"code", "message", "type", "param"}}` (+ `data` for some codes)."""

    error: ErrorDetail
    data: dict[str, Any] | None = None


class EventStreamResponse(StreamingResponse):
    """A server-sent event stream (documented as `text/event-stream`)."""

    media_type = "text/event-stream"


# One server-sent event (before OpenAPI 3.2 an event stream's `schema` describes each event): `data` is JSON.
SSE_EVENT = {
    "type": "object",
    "properties": {
        "data": {"type": "string", "contentMediaType": "application/json"},
        "event": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer", "minimum": 0},
    },
}
EVENT_STREAM = {"text/event-stream": {"schema": SSE_EVENT}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for these error statuses, each with the shared error schema."""
    return {
        status: {"description": _DESCRIPTIONS[status], "content": {"application/json": {"schema": {"$ref": ERROR_REF}}}}
        for status in statuses
    }


def stream_or_json(description: str) -> dict[int | str, dict[str, Any]]:
    """A 200 that is JSON, or an event stream when the request asks for `stream`."""
    return {200: {"description": description, "content": EVENT_STREAM}}


def _document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document with the shared error schema, minus its default 422 (our errors have one shape)."""
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(body.pop("$defs", {}))
    schemas["ErrorBody"] = body
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            default = responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if default.get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            ok = responses.get("200", {})
            if "text/event-stream" in ok.get("content", {}):
                ok["content"]["text/event-stream"] = EVENT_STREAM["text/event-stream"]
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return doc


def install_openapi(app: FastAPI) -> None:
    """Serve `_document` as the app's OpenAPI document (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
