"""The data function: its routes behind API Gateway (buffered) and its Function URL. Imports no LLM code."""

from __future__ import annotations

from typing import Any

from mangum import Mangum

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.observability import logger, metrics, tracer
from agent_core.tracing import flush_traces

_asgi = Mangum(build_app(*routes.data_routes), lifespan="off")


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)  # the body is user content, and may exceed what X-Ray takes
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        return _asgi(event, context)
    finally:
        flush_traces()  # nothing runs once the invocation returns: its spans leave now (when traces are on)
