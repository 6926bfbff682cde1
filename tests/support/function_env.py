"""The environment of an HTTP function's Lambda process, on moto (a fixture for the entry-point tests)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from agent_core.config import get_settings
from agent_core.store.embedded import ensure_resources


@pytest.fixture
def lambda_env(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The function's settings from environment variables, its table and bucket created on moto.

    The worker's entry-point tests define their own `lambda_env` (with a queue), which takes precedence there.
    """
    for name, value in {
        "AWS_LAMBDA_FUNCTION_NAME": "agent-core-fn",
        "AGENT_TABLE_NAME": "agent-core-test",
        "AGENT_DATA_BUCKET": "agent-core-test-data",
        "AGENT_LLM_PROVIDER": "offline",
        "AGENT_DATA_TOKEN_SECRET": "test-secret-data-link-key-32-bytes",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    ensure_resources(get_settings(), boto3.client("dynamodb"), boto3.client("s3"))
    yield
    get_settings.cache_clear()
