"""The daily-summary function: EventBridge Scheduler (hourly at :30) enqueues the user-days that just closed."""

from __future__ import annotations

from typing import Any

from agent_core import lambda_entry
from agent_core.observability import logger, metrics, tracer


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return lambda_entry.handle_schedule("daily_summary", event)
