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

ContextFactory = Callable[[], AppContext]


def build_app(*routers: APIRouter, context: AppContext | ContextFactory | None = None) -> FastAPI:
    """An app serving `routers`. The context is built on first use, so importing costs no I/O."""
    app = FastAPI(title="agent-core", version=__version__, docs_url=None, redoc_url=None)
    install_error_handlers(app)
    settings = context.settings if isinstance(context, AppContext) else get_settings()
    # Added first, so it sits inside CORS: a 413 still carries the CORS headers.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.cors_origins:
        # Browsers calling through API Gateway get CORS headers from the app (preflight is the gateway's).
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "X-Request-Id", "X-User-Id", "X-Agent-Now"],
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
