"""The one place tests wait: a bounded poll on a condition (tests/unit/test_test_hygiene.py holds the rule).

A test never sleeps hoping something has happened: it waits for the thing itself (an event, a condition, a
socket that accepts, a status a client can read) and fails with `what` when the bound passes. The bound is a
limit on waiting, never a timing assertion: on a fast machine the condition holds at the first look.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_BOUND_S = 30.0


class NeverHappened(AssertionError):
    """The condition did not hold within its bound."""


def poll_until(probe: Callable[[], T], what: str, *, bound_s: float = DEFAULT_BOUND_S, interval_s: float = 0.01) -> T:
    """`probe()`'s first truthy result, looking every `interval_s` for at most `bound_s`."""
    deadline = time.monotonic() + bound_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise NeverHappened(f"never happened within {bound_s} s: {what}")
        time.sleep(interval_s)


async def apoll_until(
    probe: Callable[[], Awaitable[T]], what: str, *, bound_s: float = DEFAULT_BOUND_S, interval_s: float = 0.01
) -> T:
    """The asynchronous `poll_until`: `await probe()`'s first truthy result; the loop runs on in between."""
    deadline = time.monotonic() + bound_s
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise NeverHappened(f"never happened within {bound_s} s: {what}")
        await asyncio.sleep(interval_s)


def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on the port now (a probe for `poll_until`)."""
    try:
        socket.create_connection((host, port), timeout=0.5).close()
    except OSError:
        return False
    return True
