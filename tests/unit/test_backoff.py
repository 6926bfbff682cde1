"""The one retry helper: attempts, pauses (each jitter's bounds), which exceptions are retried, hooks."""

from __future__ import annotations

import math

import pytest

from agent_core.backoff import Backoff, retrying
from agent_core.errors import ServiceUnavailable
from agent_core.store.retry import retry_write, write_backoff
from tests.support.fixtures import make_settings


class Flaky:
    """Fails with `exc` the first `times` calls, then returns how many calls it took."""

    def __init__(self, times: int, exc: type[BaseException] = ConnectionError) -> None:
        self.times, self.exc, self.calls = times, exc, 0

    async def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.times:
            raise self.exc(f"failure {self.calls}")
        return self.calls


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)  # the pause asked for; no real waiting


async def test_retries_until_success_pausing_the_doubling_steps() -> None:
    op, sleeps = Flaky(3), Sleeps()
    backoff = Backoff(attempts=5, base_s=0.1, jitter="none")
    assert await retrying(op, backoff, ConnectionError, sleep=sleeps) == 4
    assert op.calls == 4 and sleeps == pytest.approx([0.1, 0.2, 0.4])


async def test_the_last_failure_propagates_after_every_attempt() -> None:
    op, sleeps = Flaky(10), Sleeps()
    with pytest.raises(ConnectionError, match="failure 3"):
        await retrying(op, Backoff(attempts=3, base_s=1.0, jitter="none"), ConnectionError, sleep=sleeps)
    assert op.calls == 3 and sleeps == [1.0, 2.0]  # no pause after the last attempt


async def test_one_attempt_never_pauses() -> None:
    op, sleeps = Flaky(1), Sleeps()
    with pytest.raises(ConnectionError):
        await retrying(op, Backoff(attempts=1, base_s=1.0), ConnectionError, sleep=sleeps)
    assert op.calls == 1 and sleeps == []


async def test_only_the_named_exceptions_are_retried() -> None:
    op, sleeps = Flaky(1, ValueError), Sleeps()
    with pytest.raises(ValueError):
        await retrying(op, Backoff(attempts=5, base_s=0.1), (ConnectionError, TimeoutError), sleep=sleeps)
    assert op.calls == 1 and sleeps == []
    op = Flaky(2, TimeoutError)
    assert await retrying(op, Backoff(attempts=5, base_s=0.1), (ConnectionError, TimeoutError), sleep=sleeps) == 3


async def test_on_retry_sees_each_failed_attempt_before_its_pause() -> None:
    seen: list[tuple[int, str]] = []
    op, sleeps = Flaky(2), Sleeps()

    def on_retry(attempt: int, exc: BaseException) -> None:
        seen.append((attempt, str(exc)))
        assert len(sleeps) == attempt - 1  # called before the pause

    await retrying(op, Backoff(attempts=4, base_s=0.1), ConnectionError, sleep=sleeps, on_retry=on_retry)
    assert seen == [(1, "failure 1"), (2, "failure 2")]


def test_steps_double_up_to_the_cap() -> None:
    backoff = Backoff(attempts=10, base_s=0.05, cap_s=2.0)
    assert [backoff.step(n) for n in range(8)] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])
    assert Backoff(attempts=3, base_s=0.1).step(20) == pytest.approx(0.1 * 2**20)  # no cap unless given


@pytest.mark.parametrize(
    ("jitter", "low", "high"),
    [("none", 1.0, 1.0), ("full", 0.0, 1.0), ("equal", 0.5, 1.0)],
)
def test_jitter_bounds_as_fractions_of_the_step(jitter: str, low: float, high: float) -> None:
    backoff = Backoff(attempts=5, base_s=0.2, cap_s=1.0, jitter=jitter)  # type: ignore[arg-type]
    for retry in range(5):
        step = backoff.step(retry)
        assert backoff.delay(retry, rng=lambda: 0.0) == pytest.approx(low * step)
        assert backoff.delay(retry, rng=lambda: 0.999999) == pytest.approx(high * step, rel=1e-5)
        assert backoff.delay(retry, rng=lambda: 0.5) == pytest.approx((low + high) / 2 * step)
        samples = [backoff.delay(retry) for _ in range(200)]  # the real randomness stays within the bounds
        assert all(low * step <= d <= high * step for d in samples)


async def test_the_pause_uses_the_injected_randomness() -> None:
    sleeps = Sleeps()
    backoff = Backoff(attempts=3, base_s=0.4, jitter="full")
    await retrying(Flaky(2), backoff, ConnectionError, sleep=sleeps, rng=lambda: 0.25)
    assert sleeps == pytest.approx([0.1, 0.2])


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0, "base_s": 0.1}, {"attempts": 2, "base_s": -1.0}, {"attempts": 2, "base_s": 1, "cap_s": -1}],
)
def test_a_backoff_that_cannot_work_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_store_writes_back_off_as_their_settings_say() -> None:
    backoff = write_backoff(make_settings(AGENT_STORE_WRITE_ATTEMPTS=7, AGENT_STORE_RETRY_BASE_MS=250))
    assert backoff == Backoff(attempts=7, base_s=0.25, cap_s=2.0, jitter="equal")
    assert write_backoff(make_settings(AGENT_STORE_WRITE_ATTEMPTS=0)).attempts == 1  # always one try
    assert math.isclose(write_backoff(make_settings()).base_s, 0.1) and write_backoff(make_settings()).attempts == 5


async def test_store_writes_retry_only_service_unavailable() -> None:
    sleeps = Sleeps()
    backoff = Backoff(attempts=3, base_s=0.1, cap_s=2.0, jitter="none")
    assert await retry_write(Flaky(2, ServiceUnavailable), backoff, "finish_turn", sleep=sleeps) == 3
    assert sleeps == pytest.approx([0.1, 0.2])
    with pytest.raises(ServiceUnavailable):
        await retry_write(Flaky(5, ServiceUnavailable), backoff, "finish_turn", sleep=sleeps)
    with pytest.raises(ConnectionError):
        await retry_write(Flaky(1, ConnectionError), backoff, "finish_turn", sleep=sleeps)
    assert len(sleeps) == 4  # two pauses for the first write, two for the second, none for the third
