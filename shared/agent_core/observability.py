"""The Powertools logger, metrics and tracer, created once per process."""

from __future__ import annotations

import json
import sys
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "agent-core"
NAMESPACE = "AgentCore"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE, auto_patch=False)


def write_audit_line(record: dict[str, Any]) -> None:
    """The `TOOL_AUDIT` sink: one JSON line per tool call on standard error (CloudWatch in Lambda)."""
    line = {"level": "INFO", "logger": "TOOL_AUDIT", "service": SERVICE, **record}
    sys.stderr.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    sys.stderr.flush()
