"""Identifier generation: sortable message ids, run ids, chat ids."""

from __future__ import annotations

import secrets
import string
import threading
import time

_ALPHABET = string.digits + string.ascii_lowercase
_lock = threading.Lock()
_last = [0, 0]
_counters: dict[int, int] = {}


def base36(value: int, width: int = 0) -> str:
    """Lower-case base36 of a non-negative `value`, left padded with zeros to `width`."""
    if value < 0:
        raise ValueError(f"base36 of a negative number: {value}")
    digits = ""
    while value:
        value, rem = divmod(value, 36)
        digits = _ALPHABET[rem] + digits
    return (digits or "0").rjust(width, "0")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _random(n: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def sortable_id(at_ms: int | None = None) -> str:
    """Lexicographically sortable id: millis, a per-process counter, then randomness.

    Without `at_ms` the ids are monotonic even if the clock steps back. With `at_ms` (a turn's clock,
    which X-Agent-Now may set in the past) the id encodes exactly that millisecond.
    """
    with _lock:
        if at_ms is None:
            ms = now_ms()
            if ms <= _last[0]:
                ms, counter = _last[0], _last[1] + 1
            else:
                counter = 0
            _last[0], _last[1] = ms, counter
        else:
            ms = at_ms
            if len(_counters) > 10_000:
                _counters.clear()
            counter = _counters.get(ms, -1) + 1
            _counters[ms] = counter
            if ms == _last[0]:
                counter = max(counter, _last[1] + 1)
                _last[1] = counter
    return f"{base36(ms, 9)}{base36(counter, 3)}{_random(4)}"


def new_run_id() -> str:
    """base36 epoch millis + a random suffix: sortable by creation time, unique without coordination."""
    return f"{base36(now_ms())}-{_random(3)}"


def new_chat_id() -> str:
    return f"c_{_random(12)}"
