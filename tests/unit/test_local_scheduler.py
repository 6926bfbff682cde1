"""The local server's schedules fire when EventBridge Scheduler would: every 5 minutes, and hourly at :30."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core.jobs.local_scheduler import next_daily_run, next_idle_run


def test_idle_sessions_every_five_minutes() -> None:
    assert next_idle_run(datetime(2026, 1, 8, 10, 3, 20, tzinfo=UTC)) == datetime(2026, 1, 8, 10, 5, tzinfo=UTC)
    assert next_idle_run(datetime(2026, 1, 8, 10, 5, 0, tzinfo=UTC)) == datetime(2026, 1, 8, 10, 10, tzinfo=UTC)
    assert next_idle_run(datetime(2026, 1, 8, 23, 59, 1, tzinfo=UTC)) == datetime(2026, 1, 9, 0, 0, tzinfo=UTC)


def test_daily_summary_hourly_at_half_past() -> None:
    assert next_daily_run(datetime(2026, 1, 8, 10, 3, tzinfo=UTC)) == datetime(2026, 1, 8, 10, 30, tzinfo=UTC)
    assert next_daily_run(datetime(2026, 1, 8, 10, 30, tzinfo=UTC)) == datetime(2026, 1, 8, 11, 30, tzinfo=UTC)
    assert next_daily_run(datetime(2026, 1, 8, 23, 45, tzinfo=UTC)) == datetime(2026, 1, 9, 0, 30, tzinfo=UTC)
