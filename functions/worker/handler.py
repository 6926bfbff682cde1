"""The worker function: consumes the work queue (SQS batches) and reports the records that failed."""

from __future__ import annotations

from typing import Any

from agent_core import lambda_entry
from agent_core.observability import logger, metrics, tracer
from agent_core.warmup import load_llm_function_dependencies

load_llm_function_dependencies()


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return lambda_entry.handle_sqs(event)
