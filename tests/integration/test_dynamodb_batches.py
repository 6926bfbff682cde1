"""BatchGetItem / BatchWriteItem on moto with unprocessed items injected (as a throttled table returns them):
resent with exponential backoff and full jitter, a bounded number of times."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.backoff import Backoff
from agent_core.store.dynamodb import DynamoTable, UnprocessedItems
from agent_core.store.schema import PK, SK


class Throttle:
    """An `after-call` hook: the first `times` responses report their request's first `count` items unprocessed."""

    def __init__(self, times: int, count: int = 2) -> None:
        self.times = times
        self.count = count
        self.calls = 0
        self.sizes: list[int] = []
        self.request: dict[str, Any] = {}

    def before(self, params: dict[str, Any], **_: Any) -> None:
        self.request = params["RequestItems"]

    def __call__(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls += 1
        (table, requested), *_ = self.request.items()
        keys = requested["Keys"] if isinstance(requested, dict) else requested
        self.sizes.append(len(keys))
        if self.calls > self.times:
            return
        if model.name == "BatchGetItem":
            held = {_key_of(k) for k in keys[: self.count]}
            found = parsed["Responses"][table]
            parsed["Responses"][table] = [i for i in found if _key_of(i) not in held]
            parsed["UnprocessedKeys"] = {table: {**requested, "Keys": keys[: self.count]}}
        else:
            parsed["UnprocessedItems"] = {table: keys[: self.count]}


def _key_of(item: dict[str, Any]) -> tuple[str, str]:
    value = item.get("DeleteRequest", {}).get("Key", item)
    return value[PK]["S"], value[SK]["S"]


@pytest.fixture
def delays() -> list[float]:
    return []


@pytest.fixture
def table(moto_table: DynamoTable, delays: list[float]) -> DynamoTable:
    async def record(seconds: float) -> None:
        delays.append(seconds)  # the pause asked for; no real waiting in tests

    return DynamoTable(
        moto_table.table_name,
        lambda: moto_table.client,
        backoff=Backoff(attempts=5, base_s=0.1, cap_s=0.5),
        sleep=record,
    )


def _hook(table: DynamoTable, operation: str, throttle: Throttle) -> None:
    table.client.meta.events.register(f"before-parameter-build.dynamodb.{operation}", throttle.before)
    table.client.meta.events.register(f"after-call.dynamodb.{operation}", throttle)


async def _seed(table: DynamoTable, n: int) -> list[dict[str, str]]:
    keys = [{PK: "CHAT#c1", SK: f"MSG#{i:03d}"} for i in range(n)]
    for key in keys:
        await table.put({**key, "content": "x"})
    return keys


async def test_unprocessed_keys_are_fetched_again_after_growing_jittered_pauses(
    table: DynamoTable, delays: list[float]
) -> None:
    keys = await _seed(table, 5)
    throttle = Throttle(times=3)
    _hook(table, "BatchGetItem", throttle)
    found = await table.batch_get(keys)
    # Every item arrives once, after three resends of exactly the unprocessed keys
    assert sorted(i[SK] for i in found) == [k[SK] for k in keys]
    assert throttle.sizes == [5, 2, 2, 2]
    # Each pause is within its exponential ceiling (full jitter), capped
    assert len(delays) == 3
    assert all(0.0 <= d <= ceiling for d, ceiling in zip(delays, [0.1, 0.2, 0.4], strict=True))


async def test_unprocessed_writes_are_resent_with_backoff(table: DynamoTable, delays: list[float]) -> None:
    keys = await _seed(table, 30)
    throttle = Throttle(times=2)
    _hook(table, "BatchWriteItem", throttle)
    await table.batch_delete(keys)
    assert throttle.sizes == [25, 2, 2, 5]  # the first batch of 25 resent twice, then the last 5
    assert len(delays) == 2
    assert await table.batch_get(keys) == []


async def test_a_table_that_keeps_throttling_is_an_error_after_the_bound(
    table: DynamoTable, delays: list[float]
) -> None:
    keys = await _seed(table, 3)
    _hook(table, "BatchWriteItem", Throttle(times=100))
    with pytest.raises(UnprocessedItems, match="2 item"):
        await table.batch_delete(keys)
    # Five requests in all, four pauses, the last at the cap
    assert len(delays) == 4 and all(d <= 0.5 for d in delays)


def test_the_ceiling_doubles_up_to_the_cap() -> None:
    backoff = Backoff(attempts=10, base_s=0.1, cap_s=0.5)
    samples = [[backoff.delay(retry) for _ in range(200)] for retry in range(6)]
    for retry, values in enumerate(samples):
        ceiling = min(0.5, 0.1 * 2**retry)
        assert all(0.0 <= v <= ceiling for v in values)
        assert max(values) > ceiling / 2  # jittered across the range, not a constant
