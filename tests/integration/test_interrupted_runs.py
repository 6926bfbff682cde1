"""Runs whose process died: the lease a silent holder loses, and the settling of interrupted runs.

Every test runs on the in-memory table, on DynamoDB (moto) and on SQLite. The clock is injected: the
heartbeat's sleeps advance it, nothing sleeps.
"""

from __future__ import annotations

import pytest

from agent_core.domain.models import INTERRUPTED, Chat, Run, RunStatus
from agent_core.errors import RunInProgress
from agent_core.runtime.interrupted import settle_interrupted_run, settle_interrupted_runs
from agent_core.runtime.lease import LeaseKeeper
from agent_core.store import items as it
from agent_core.store.schema import SHARDS
from agent_core.store.table import Table
from agent_core.store.table_store import TableStore
from tests.integration.test_store_contract import T0, completed, new_chat, new_run, user_message
from tests.support.fixtures import make_settings


@pytest.fixture
def store(any_table: Table) -> TableStore:
    return TableStore(any_table)


class HolderDied(Exception):
    """The holder's process stops: no renewal after this."""


async def _leased(store: TableStore) -> set[str]:
    """The chats in the lease index (every shard)."""
    found: set[str] = set()
    for index in range(SHARDS):
        async for page in store.leased_chat_pages(index):
            found.update(c.chat_id for c in page)
    return found


async def _take(store: TableStore, chat: Chat, at: int, question: str = "hello?") -> Run:
    run = new_run(chat, started_at=at)
    await store.begin_turn(chat, run, user_message(chat, run, question), make_settings().run_lease_ms)
    return run


async def test_a_holder_that_stops_heartbeating_loses_its_lease_after_two_missed_renewals(store: TableStore) -> None:
    settings = make_settings()  # the deployed defaults: a heartbeat every 10 s
    beat, lease = settings.run_heartbeat_ms, settings.run_lease_ms
    chat = await store.create_chat(new_chat())
    holder = await _take(store, chat, T0)

    # Given a holder that renews twice on its heartbeat, then dies
    clock = [T0]
    renewals: list[int] = []

    async def sleep(seconds: float) -> None:
        if len(renewals) == 2:
            raise HolderDied
        clock[0] += round(seconds * 1000)
        renewals.append(clock[0])

    keeper = LeaseKeeper(store, chat.chat_id, holder.run_id, beat, lease, lambda: clock[0], sleep)
    with pytest.raises(HolderDied):
        await keeper.beat()
    assert renewals == [T0 + beat, T0 + 2 * beat]
    loaded = await store.get_chat(chat.chat_id, chat.user_id)
    assert loaded is not None and loaded.lease_expires_at == T0 + 2 * beat + lease
    last = T0 + 2 * beat

    # When another turn comes after one missed renewal: the chat is still busy
    early = new_run(chat, started_at=last + beat + 1)
    with pytest.raises(RunInProgress):
        await store.begin_turn(chat, early, user_message(chat, early, "me?"), lease)

    # Then after two missed renewals (and before a third) the lease is the next turn's
    taker = new_run(chat, started_at=last + lease + 1)
    assert taker.started_at < last + 3 * beat
    await store.begin_turn(chat, taker, user_message(chat, taker, "anyone?"), lease)
    loaded = await store.get_chat(chat.chat_id, chat.user_id)
    assert loaded is not None and loaded.active_run_id == taker.run_id

    # And the taking turn settles the dead run: failed `interrupted`, replaying its question and the error
    assert await settle_interrupted_run(store, chat.chat_id, holder.run_id, taker.started_at, release_lease=False)
    dead = await store.get_run(chat.chat_id, holder.run_id)
    assert dead is not None and (dead.status, dead.error_code) == (RunStatus.FAILED, INTERRUPTED)
    assert dead.snapshot is not None
    assert [(e["type"], e.get("message"), e.get("code")) for e in dead.snapshot] == [
        ("request.query", "hello?", None),
        ("run.error", dead.error_message, INTERRUPTED),
    ]
    # The dead run's heartbeat, were it to wake, could not renew the taker's lease
    assert await store.renew_lease(chat.chat_id, holder.run_id, taker.started_at + 10 * lease) is False


async def test_the_heartbeat_retries_a_failed_renewal_within_the_lease() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.calls: list[int] = []

        async def renew_lease(self, chat_id: str, run_id: str, expires_at: int, holder: str | None = None) -> bool:
            self.calls.append(expires_at)
            if len(self.calls) == 1:
                raise ConnectionError("throttled")
            return len(self.calls) < 3

    store, clock = Flaky(), [0]

    async def sleep(seconds: float) -> None:
        clock[0] += round(seconds * 1000)

    await LeaseKeeper(store, "c", "r", 900, 2250, lambda: clock[0], sleep).beat()  # type: ignore[arg-type]
    # A failed renewal is retried after a third of the interval, well before the lease (2.5 beats) ends
    assert store.calls == [900 + 2250, 1200 + 2250, 2100 + 2250]


async def test_settling_fails_expired_runs_with_a_replay_and_frees_their_chats(store: TableStore) -> None:
    lease = make_settings().run_lease_ms
    # Given a dead run (lease expired), a live one, and a run that ended but left its lease behind
    dead_chat, live_chat, left_chat = [await store.create_chat(new_chat()) for _ in range(3)]
    dead = await _take(store, dead_chat, T0, "where is my answer?")
    live = await _take(store, live_chat, T0 + lease)
    left = await _take(store, left_chat, T0)
    ended = left.model_copy(update={"status": RunStatus.FAILED, "error_code": "llm_unavailable", "ended_at": T0 + 5})
    await store.table.put(it.run_to_item(ended))
    assert await _leased(store) == {dead.chat_id, live.chat_id, left.chat_id}

    # When the idle pass settles the leases expired by now
    now = T0 + lease + 10
    assert await settle_interrupted_runs(store, now, expired_before=now) == 2

    # Then the dead run is failed `interrupted` with its question and error, and its chat is free
    run = await store.get_run(dead.chat_id, dead.run_id)
    assert run is not None and (run.status, run.error_code, run.ended_at) == (RunStatus.FAILED, INTERRUPTED, now)
    assert run.snapshot is not None
    assert [e["type"] for e in run.snapshot] == ["request.query", "run.error"]
    assert run.snapshot[0]["message"] == "where is my answer?" and run.snapshot[1]["code"] == INTERRUPTED
    assert all(e["runId"] == dead.run_id for e in run.snapshot)
    # The ended run keeps its own end; its lease is freed
    kept = await store.get_run(left.chat_id, left.run_id)
    assert kept is not None and kept.error_code == "llm_unavailable"
    for chat_id in (dead.chat_id, left.chat_id):
        chat = await store.get_chat(chat_id, dead.user_id)
        assert chat is not None and chat.active_run_id is None and chat.lease_expires_at is None
    # The live run is untouched
    assert await _leased(store) == {live.chat_id}
    assert (await store.get_run(live.chat_id, live.run_id)) == live

    # When the local server starts (sole owner of its data): every lease is a dead process's
    assert await settle_interrupted_runs(store, now, expired_before=None) == 1
    run = await store.get_run(live.chat_id, live.run_id)
    assert run is not None and run.error_code == INTERRUPTED and await _leased(store) == set()
    # And settling again finds nothing
    assert await settle_interrupted_runs(store, now, expired_before=None) == 0


async def test_a_run_settled_as_interrupted_that_was_alive_still_stores_its_answer(store: TableStore) -> None:
    lease = make_settings().run_lease_ms
    chat = await store.create_chat(new_chat())
    slow = await _take(store, chat, T0)
    # Given a run whose lease expired while it still ran (its heartbeat could not reach storage)
    now = T0 + lease + 1
    assert await settle_interrupted_runs(store, now, expired_before=now) == 1
    # When it ends after all
    done = completed(slow, now + 5, answer="late but here")
    await store.finish_turn(done, [], now + 5)
    # Then its own end replaces the interrupted record
    run = await store.get_run(chat.chat_id, slow.run_id)
    assert run is not None and run.status == RunStatus.COMPLETED and run.error_code is None


def test_the_lease_is_two_and_a_half_heartbeats() -> None:
    assert make_settings(AGENT_RUN_HEARTBEAT_MS="4000").run_lease_ms == 10_000


async def test_a_run_that_cannot_be_settled_is_left_for_the_next_pass(
    store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = make_settings().run_lease_ms
    first, second = [await _take(store, await store.create_chat(new_chat()), T0) for _ in range(2)]
    original = store.get_run

    async def flaky(chat_id: str, run_id: str) -> Run | None:
        if run_id == first.run_id:
            raise ConnectionError("storage unavailable")
        return await original(chat_id, run_id)

    # Given storage failing for one of two dead runs
    monkeypatch.setattr(store, "get_run", flaky)
    now = T0 + lease + 1
    # When the pass runs, the other is settled all the same
    assert await settle_interrupted_runs(store, now, expired_before=now) == 1
    assert await _leased(store) == {first.chat_id}
    settled = await store.get_run(second.chat_id, second.run_id)
    assert settled is not None and settled.error_code == INTERRUPTED
    # And the next pass settles the first
    monkeypatch.setattr(store, "get_run", original)
    assert await settle_interrupted_runs(store, now, expired_before=now) == 1
    assert await _leased(store) == set()
