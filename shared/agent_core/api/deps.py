"""Request-scoped dependencies: the app context, the caller, the request's clock."""

from __future__ import annotations

import threading
from datetime import datetime

from fastapi import Request

from agent_core.api.auth import resolve_user
from agent_core.api.gateway import public_base_url
from agent_core.context import AppContext
from agent_core.domain.instant import NotAnInstant, parse_instant
from agent_core.errors import AgentError, InvalidRequest
from agent_core.memory.calendar import valid_zone

_lock = threading.Lock()


class ClockOverrideDisabled(AgentError):
    """`X-Agent-Now` sent to a dev-stage server started without AGENT_ALLOW_CLOCK_OVERRIDE (400)."""

    code = "clock_override_disabled"
    status = 400
    type = "invalid_request_error"


def app_context(request: Request) -> AppContext:
    """The app's context, built once on first use."""
    state = request.app.state
    if state.context is None:
        with _lock:
            if state.context is None:
                state.context = state.context_factory()
    context: AppContext = state.context
    return context


async def current_user(request: Request) -> str:
    """The caller (a JWT is verified in a worker thread, never on the event loop)."""
    return await resolve_user(request, app_context(request).settings)


def request_now(request: Request) -> datetime | None:
    """`X-Agent-Now` sets "now" for this request (the turn's, a job's): only with AGENT_ALLOW_CLOCK_OVERRIDE in
    the dev stage, never in Lambda. It never applies to data-token expiry or run leases (wall clock only).

    In the dev stage without the setting the header is refused (400 `clock_override_disabled`), so a walkthrough
    run against the wrong server fails loudly; outside dev it is ignored (never honoured, nothing revealed)."""
    value = request.headers.get("x-agent-now")
    settings = app_context(request).settings
    if value is None or not settings.dev_features:
        return None
    if not settings.allow_clock_override:
        raise ClockOverrideDisabled(
            "X-Agent-Now is honoured only when the server runs with AGENT_ALLOW_CLOCK_OVERRIDE=true",
            param="X-Agent-Now",
        )
    try:
        return parse_instant(value)
    except NotAnInstant as exc:
        raise InvalidRequest(f"X-Agent-Now: {exc}", param="X-Agent-Now") from None


def link_base(request: Request) -> str:
    """Where the client reached this API (`AGENT_PUBLIC_BASE_URL`, else the gateway's address and stage path)."""
    return public_base_url(request, app_context(request).settings)


def request_timezone(request: Request, value: str | None) -> str | None:
    """The zone the client names for this request: the body's `timezone`, else the `X-Timezone` header.

    Validated (400 `invalid_timezone`); None when the client names none (the profile's zone, or the default).
    """
    if value is not None:
        return valid_zone(value, "timezone")
    header = request.headers.get("x-timezone")
    return valid_zone(header, "X-Timezone") if header is not None else None
