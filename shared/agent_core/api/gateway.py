"""What the gateway (API Gateway, a Function URL) said about a request: its request context and public address.

Under Mangum the Lambda event is `scope["aws.event"]`. Behind the Lambda Web Adapter the app is a plain HTTP
server and the adapter passes the event's `requestContext` as JSON in the `x-amzn-request-context` header. That
header is trusted only when this process runs behind the adapter (which replaces any client-sent copy); a local
server or a Mangum function ignores it, so a client cannot forge an identity with it.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from agent_core.config import Settings

ADAPTER_CONTEXT_HEADER = "x-amzn-request-context"
MAX_CONTEXT_BYTES = 64 * 1024


def _event(request: Request) -> dict[str, Any]:
    event = request.scope.get("aws.event")
    return event if isinstance(event, dict) else {}


def _adapter_context(request: Request) -> dict[str, Any]:
    raw = request.headers.get(ADAPTER_CONTEXT_HEADER, "")
    if not raw or len(raw) > MAX_CONTEXT_BYTES:
        return {}
    try:
        context = json.loads(raw)
    except ValueError:
        return {}
    return context if isinstance(context, dict) else {}


def request_context(request: Request, settings: Settings) -> dict[str, Any]:
    """The gateway's `requestContext` (REST v1 or payload 2.0), or {} when the request did not come through one."""
    context = _event(request).get("requestContext")
    if isinstance(context, dict):
        return context
    return _adapter_context(request) if settings.behind_web_adapter else {}


def _stage_prefix(context: dict[str, Any], app_path: str) -> str:
    """The path before the app's own path: `/prod` for REST API stage `prod`, a base path mapping, or ''."""
    full = context.get("path")  # REST v1: the path as the client sent it, stage (or base path) included
    if not isinstance(full, str) or not full.endswith(app_path):
        return ""
    return full[: len(full) - len(app_path)].rstrip("/")


def public_base_url(request: Request, settings: Settings) -> str:
    """Where clients reach this API, without a trailing slash: the setting, else the gateway's address and stage
    path, else '' (links stay root-relative, as on a local server)."""
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/")
    context = request_context(request, settings)
    domain = context.get("domainName")
    if not isinstance(domain, str) or not domain:
        return ""
    return f"https://{domain}{_stage_prefix(context, request.url.path)}"
