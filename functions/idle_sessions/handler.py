"""The idle-sessions function: EventBridge Scheduler (every 5 minutes) closes idle sessions, expires leases."""

from __future__ import annotations

from typing import Any

from agent_core import lambda_entry
from agent_core.observability import logger, metrics, tracer


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return lambda_entry.handle_schedule("idle_sessions", event)
