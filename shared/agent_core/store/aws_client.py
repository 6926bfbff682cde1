"""The one way adapters hold a boto3 client: created lazily (never at import), called in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


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
        """boto3 blocks: run the call in a thread so the event loop keeps streaming."""
        return await asyncio.to_thread(getattr(self.client, method), *args, **kwargs)
