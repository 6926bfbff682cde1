"""The LLM adapters' retry policy: how long to wait before another attempt (before any output only)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

SleepFn = Callable[[float], Awaitable[None]]

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 20.0


def backoff_delay(attempt: int, rng: Callable[[], float], retry_after: float | None = None) -> float:
    """The server's Retry-After when it sent one (capped), else capped exponential backoff with jitter."""
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP_S)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * (2**attempt))
    return ceiling / 2 + rng() * ceiling / 2
