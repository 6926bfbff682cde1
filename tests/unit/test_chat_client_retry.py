"""How `agent-core chat` says when a refused turn (budget_exceeded / rate_limited) may be sent again."""

from __future__ import annotations

import time

from agent_core.chat_client import retry_in


def test_seconds_minutes_and_hours_with_the_clock_time() -> None:
    now = time.mktime((2026, 11, 26, 10, 0, 0, 0, 0, -1))  # 10:00:00 local
    assert retry_in(42, now) == "try again in 42 s"
    assert retry_in(60, now) == "try again in 1 min, at 10:01"
    assert retry_in(61, now) == "try again in 2 min, at 10:01"  # rounded up: never sooner than allowed
    assert retry_in(14 * 3600, now) == "try again in 14 h 0 min, at 00:00"
    assert retry_in(3 * 3600 + 30 * 60, now) == "try again in 3 h 30 min, at 13:30"
