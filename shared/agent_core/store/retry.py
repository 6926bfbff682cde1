"""Retrying the writes that must not be lost: transient storage failures, with capped, jittered backoff."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from agent_core.config import Settings
from agent_core.errors import ServiceUnavailable
from agent_core.observability import logger

T = TypeVar("T")
CAP_S = 2.0


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_s: float = 0.1

    @staticmethod
    def of(settings: Settings) -> RetryPolicy:
        return RetryPolicy(attempts=max(1, settings.store_write_attempts), base_s=settings.store_retry_base_ms / 1000)

    def delay(self, attempt: int) -> float:
        """Before attempt `attempt + 1`: half the capped exponential step, plus up to as much again."""
        step = min(CAP_S, self.base_s * (2**attempt))
        return step / 2 + random.random() * step / 2


async def retrying(op: Callable[[], Awaitable[T]], policy: RetryPolicy, what: str) -> T:
    """`op()` until it succeeds, retrying only `ServiceUnavailable`; the last failure is raised.

    Every `op` retried here must be idempotent: an attempt whose answer was lost may have committed.
    """
    attempt = 0
    while True:
        try:
            return await op()
        except ServiceUnavailable as exc:
            attempt += 1
            if attempt >= policy.attempts:
                logger.error("storage write failed", extra={"write": what, "attempts": attempt, "error": exc.message})
                raise
            logger.warning("storage write failed, retrying", extra={"write": what, "attempt": attempt})
            await asyncio.sleep(policy.delay(attempt - 1))
