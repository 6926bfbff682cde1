"""Retrying the writes that must not be lost: transient storage failures, with capped, jittered backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from agent_core.backoff import Backoff, Sleep, retrying
from agent_core.config import Settings
from agent_core.errors import ServiceUnavailable
from agent_core.observability import logger

T = TypeVar("T")
CAP_S = 2.0


def write_backoff(settings: Settings) -> Backoff:
    """AGENT_STORE_WRITE_ATTEMPTS tries; pauses from AGENT_STORE_RETRY_BASE_MS doubling up to 2 s, each half
    its step plus up to as much again."""
    attempts = max(1, settings.store_write_attempts)
    return Backoff(attempts=attempts, base_s=max(0, settings.store_retry_base_ms) / 1000, cap_s=CAP_S, jitter="equal")


async def retry_write(op: Callable[[], Awaitable[T]], backoff: Backoff, what: str, sleep: Sleep = asyncio.sleep) -> T:
    """`op()` until it succeeds, retrying only `ServiceUnavailable`; the last failure is raised.

    Every `op` retried here must be idempotent: an attempt whose answer was lost may have committed.
    """

    def retried(attempt: int, exc: BaseException) -> None:
        logger.warning("storage write failed, retrying", extra={"write": what, "attempt": attempt})

    try:
        return await retrying(op, backoff, ServiceUnavailable, sleep=sleep, on_retry=retried)
    except ServiceUnavailable as exc:
        extra = {"write": what, "attempts": backoff.attempts, "error": exc.message}
        logger.error("storage write failed", extra=extra)
        raise
