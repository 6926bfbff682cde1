"""The one way adapters hold a boto3 client: created lazily (never at import), called in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_core.config import Settings
from agent_core.errors import ServiceUnavailable

# Error codes AWS answers when it is busy or failing; a later attempt may succeed.
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


def transient(exc: BaseException) -> bool:
    """Throttling, 5xx, connection failures and timeouts (after botocore's own retries): worth a retry."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ConnectionError | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return error.get("Code") in TRANSIENT_CODES or status >= 500
    return False


def boto_client(settings: Settings, service: str, **config: Any) -> Any:
    """A boto3 client with the product's timeouts and adaptive retries (its own session: thread-safe)."""
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {
        "retries": {"max_attempts": 4, "mode": "adaptive"},
        "connect_timeout": 3,
        "read_timeout": 10,
    }
    options.update(config)
    return boto3.session.Session().client(service, region_name=settings.aws_region, config=Config(**options))  # type: ignore[call-overload]


class ThreadedAwsClient:
    """Base of the DynamoDB, S3 and SQS adapters; the factory is injectable (tests, moto, hooks)."""

    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self._client_factory = client_factory
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """boto3 blocks: run the call in a thread so the event loop keeps streaming.

        A transient failure (see `transient`) becomes `ServiceUnavailable`: 503 + Retry-After at the edge,
        retried by the writes that must not be lost.
        """
        try:
            return await asyncio.to_thread(getattr(self.client, method), *args, **kwargs)
        except Exception as exc:
            if transient(exc):
                raise ServiceUnavailable(f"storage is unavailable ({method}: {type(exc).__name__})") from exc
            raise
