"""The FastAPI app factory: one app shape for Lambda (Mangum / web adapter) and the local server."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from agent_core import __version__
from agent_core.api.body_limit import BodyLimit
from agent_core.api.errors import install_error_handlers
from agent_core.api.openapi import install_openapi
from agent_core.config import get_settings
from agent_core.context import AppContext, build_context
from agent_core.tracing import configure_tracing

ContextFactory = Callable[[], AppContext]


def _app(docs: bool) -> FastAPI:
    """With `docs`, /docs (Swagger UI) and /redoc, their scripts served by the app itself (no CDN)."""
    if not docs:
        return FastAPI(title="agent-core", version=__version__, docs_url=None, redoc_url=None)
    from fastapi_offline import FastAPIOffline  # the local server's extra: not in the Lambda layer

    return FastAPIOffline(title="agent-core", version=__version__, docs_url="/docs", redoc_url="/redoc")


def build_app(*routers: APIRouter, context: AppContext | ContextFactory | None = None, docs: bool = False) -> FastAPI:
    """An app serving `routers`. The context is built on first use, so importing costs no I/O.

    `docs` adds the API documentation pages (the local server turns it on).
    """
    app = _app(docs)
    install_error_handlers(app)
    settings = context.settings if isinstance(context, AppContext) else get_settings()
    # FastAPI traces a request only when a tracer provider is installed as it arrives: installed now (a Lambda
    # function's init), the first request is traced too, not only those after the lazy context was built.
    configure_tracing(settings)
    # Added first, so it sits inside CORS: a 413 or 408 still carries the CORS headers.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, read_timeout_s=settings.body_read_timeout_s)
    if settings.cors_origins:
        # Browsers calling through API Gateway get CORS headers from the app (preflight is the gateway's).
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "X-Request-Id",
                "X-User-Id",
                "X-Agent-Now",
                "X-Timezone",
                "Last-Event-ID",  # a resumed stream continues after the last event the page got
            ],
        )
    for router in routers:
        app.include_router(router)
    install_openapi(app)
    if isinstance(context, AppContext):
        app.state.context = context
    else:
        app.state.context = None
        app.state.context_factory = context or (lambda: build_context(get_settings()))
    return app
