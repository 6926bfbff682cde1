"""Bounded retries with capped exponential backoff: the one retry loop of the code base (storage writes,
DynamoDB batches' unprocessed items, SQS batch entries).

The LLM adapters keep their own: the openai SDK retries itself, and the Bedrock adapter mirrors it.
`retrying` retries the exceptions it is told to; a caller whose failure is a partial result (items left
unprocessed) raises for what is left and keeps it in its closure. Tests inject `sleep` (and `rng`)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

T = TypeVar("T")
Jitter = Literal["none", "full", "equal"]
Sleep = Callable[[float], Awaitable[None]]
Rng = Callable[[], float]  # uniform in [0, 1)


@dataclass(frozen=True)
class Backoff:
    """`attempts` tries in all (the first included); before retry `n` (0-based) a pause drawn from the step
    `min(cap_s, base_s * 2**n)`: the step itself (`none`), uniform in [0, step] (`full`), or half the step
    plus up to as much again (`equal`)."""

    attempts: int
    base_s: float
    cap_s: float = math.inf
    jitter: Jitter = "full"

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a backoff needs at least one attempt")
        if self.base_s < 0 or self.cap_s < 0:
            raise ValueError("backoff steps cannot be negative")

    def step(self, retry: int) -> float:
        """The ceiling of the pause before retry `retry` (0-based): doubling from `base_s`, capped."""
        return min(self.cap_s, self.base_s * 2**retry)

    def delay(self, retry: int, rng: Rng = random.random) -> float:
        """The pause before retry `retry` (0-based)."""
        step = self.step(retry)
        if self.jitter == "full":
            return step * rng()
        if self.jitter == "equal":
            return step / 2 + step / 2 * rng()
        return step


async def retrying(
    op: Callable[[], Awaitable[T]],
    backoff: Backoff,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    *,
    sleep: Sleep = asyncio.sleep,
    rng: Rng = random.random,
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """`op()` until it returns, at most `backoff.attempts` times; only `retry_on` exceptions are retried.

    Any other exception, and the last attempt's failure, propagate unchanged. `on_retry(attempt, exc)` runs
    before each pause (`attempt`: how many attempts have failed). Every `op` retried must be idempotent: an
    attempt whose answer was lost may have taken effect."""
    for retry in range(backoff.attempts - 1):
        try:
            return await op()
        except retry_on as exc:
            if on_retry is not None:
                on_retry(retry + 1, exc)
        await sleep(backoff.delay(retry, rng))
    return await op()
