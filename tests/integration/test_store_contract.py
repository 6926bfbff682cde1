"""One contract suite for the Store: TableStore over the in-memory table and over moto DynamoDB.

Every test that takes `any_table` runs twice (memory, moto): the two adapters must behave alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent_core.domain.ids import sortable_id
from agent_core.domain.models import (
    Chat,
    Message,
    Role,
    Run,
    RunStatus,
    Summary,
    ToolCall,
    ToolCallRecord,
    ToolStatus,
    TurnResult,
    Usage,
)
from agent_core.errors import InvalidRequest, RunInProgress
from agent_core.store import items as it
from agent_core.store.base import ChatPage, DuplicateRequest, ReservationRefused
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.schema import SK
from agent_core.store.table import Item, Table, UpdateOp
from agent_core.store.table_store import TableStore
from agent_core.usage.meter import UsageMeter
from tests.support.fixtures import make_settings

ALICE = "user-alice"
MALLORY = "user-mallory"
LEASE_MS = 60_000
T0 = 1_700_000_000_000

_chat_seq = [0]
_req_seq = [0]


# ---------------------------------------------------------------- helpers


@pytest.fixture
def store(any_table: Table) -> TableStore:
    return TableStore(any_table)


def new_chat(user_id: str = ALICE, at: int = T0, chat_id: str | None = None) -> Chat:
    _chat_seq[0] += 1
    return Chat(
        chat_id=chat_id or f"c_test{_chat_seq[0]:06d}",
        user_id=user_id,
        title=f"chat {_chat_seq[0]}",
        created_at=at,
        last_activity_at=at,
    )


def new_run(chat: Chat, started_at: int, request_id: str | None = None, run_id: str | None = None) -> Run:
    _req_seq[0] += 1
    rid = run_id or f"run-{_req_seq[0]:06d}"
    return Run(
        run_id=rid,
        chat_id=chat.chat_id,
        user_id=chat.user_id,
        request_id=request_id or f"req-{_req_seq[0]:06d}",
        model="test-model",
        started_at=started_at,
    )


def user_message(chat: Chat, run: Run, content: str) -> Message:
    return Message(
        id=sortable_id(run.started_at),
        chat_id=chat.chat_id,
        role=Role.USER,
        content=content,
        run_id=run.run_id,
        request_id=run.request_id,
        created_at=run.started_at,
    )


def assistant_message(chat: Chat, run: Run, content: str, at: int) -> Message:
    return Message(
        id=sortable_id(at),
        chat_id=chat.chat_id,
        role=Role.ASSISTANT,
        content=content,
        run_id=run.run_id,
        created_at=at,
    )


def completed(run: Run, ended_at: int, answer: str = "done") -> Run:
    return run.model_copy(
        update={
            "status": RunStatus.COMPLETED,
            "ended_at": ended_at,
            "usage": Usage(prompt_tokens=120, completion_tokens=30),
            "result": TurnResult(request_id=run.request_id, assistant_message=answer),
        }
    )


async def items_under(table: Table, chat_id: str) -> list[Item]:
    """Every item under the chat's partition key (all pages)."""
    found: list[Item] = []
    start: Item | None = None
    while True:
        page = await table.query(it.chat_pk(chat_id), start_key=start, limit=50)
        found.extend(page.items)
        if page.last_key is None:
            return found
        start = page.last_key


async def seed_turn(store: TableStore, chat: Chat, at: int, replies: int) -> list[Message]:
    """One finished turn: a USER message then `replies` assistant messages; returns them oldest first."""
    run = new_run(chat, started_at=at)
    first = user_message(chat, run, f"question at {at}")
    await store.begin_turn(chat, run, first, LEASE_MS)
    answers = [assistant_message(chat, run, f"answer {i} at {at}", at + 1 + i) for i in range(replies)]
    await store.finish_turn(completed(run, at + replies + 1), answers, at + replies + 1)
    return [first, *answers]


# ---------------------------------------------------------------- chats


async def test_create_chat_then_get_chat_returns_it(store: TableStore) -> None:
    # Given a new chat
    chat = new_chat()

    # When it is created and read back by its owner
    created = await store.create_chat(chat)
    loaded = await store.get_chat(chat.chat_id, ALICE)

    # Then the stored chat equals what was written
    assert created == chat
    assert loaded == chat
    assert loaded is not None and loaded.active_run_id is None and loaded.message_count == 0


async def test_get_chat_with_another_users_id_returns_none(store: TableStore) -> None:
    # Given Alice's chat
    chat = await store.create_chat(new_chat(ALICE))

    # When Mallory asks for it
    loaded = await store.get_chat(chat.chat_id, MALLORY)

    # Then it does not exist for her; an unknown id does not exist for anyone
    assert loaded is None
    assert await store.get_chat("c_missing", ALICE) is None


async def test_list_chats_orders_newest_activity_first(store: TableStore) -> None:
    # Given Alice's chats created out of activity order, and one of Mallory's
    for at in (T0 + 300, T0 + 100, T0 + 500, T0 + 200):
        await store.create_chat(new_chat(ALICE, at=at))
    await store.create_chat(new_chat(MALLORY, at=T0 + 999))

    # When Alice lists her chats
    page = await store.list_chats(ALICE, limit=10, cursor=None)

    # Then only hers come back, newest activity first
    assert [c.last_activity_at for c in page.items] == [T0 + 500, T0 + 300, T0 + 200, T0 + 100]
    assert all(c.user_id == ALICE for c in page.items)
    assert page.next_cursor is None


async def test_list_chats_paginates_with_limit_and_cursor(store: TableStore) -> None:
    # Given five chats of Alice's
    chats = [await store.create_chat(new_chat(ALICE, at=T0 + i * 10)) for i in range(5)]
    expected = [c.chat_id for c in sorted(chats, key=lambda c: c.last_activity_at, reverse=True)]

    # When she walks the listing two at a time
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await store.list_chats(ALICE, limit=2, cursor=cursor)
        pages.append([c.chat_id for c in page.items])
        cursor = page.next_cursor
        if cursor is None:
            break

    # Then the pages are 2, 2, 1 long and together are every chat once, in order
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [cid for p in pages for cid in p] == expected


async def test_list_chats_rejects_a_cursor_from_another_users_listing(store: TableStore) -> None:
    # Given a cursor taken from Mallory's listing
    for i in range(3):
        await store.create_chat(new_chat(MALLORY, at=T0 + i))
        await store.create_chat(new_chat(ALICE, at=T0 + i))
    mallory_page = await store.list_chats(MALLORY, limit=1, cursor=None)
    assert mallory_page.next_cursor is not None

    # When Alice lists with it / with garbage
    # Then both are rejected as invalid requests
    with pytest.raises(InvalidRequest):
        await store.list_chats(ALICE, limit=1, cursor=mallory_page.next_cursor)
    with pytest.raises(InvalidRequest):
        await store.list_chats(ALICE, limit=1, cursor="not-a-cursor!!")


async def test_delete_chat_removes_every_item_of_the_chat(store: TableStore) -> None:
    # Given a chat with messages, a finished run, a failed+restarted run, a summary and request markers
    table = store.table
    chat = await store.create_chat(new_chat(ALICE))
    other = await store.create_chat(new_chat(ALICE, at=T0 + 1))
    messages = await seed_turn(store, chat, T0 + 10, replies=2)
    await seed_turn(store, other, T0 + 10, replies=1)
    failed_run = new_run(chat, started_at=T0 + 100)
    await store.begin_turn(chat, failed_run, user_message(chat, failed_run, "again"), LEASE_MS)
    await store.finish_turn(failed_run.model_copy(update={"status": RunStatus.FAILED}), [], T0 + 101)
    retry = new_run(chat, started_at=T0 + 200, request_id=failed_run.request_id)
    await store.restart_turn(chat, failed_run, retry, LEASE_MS)
    await store.replace_summary(
        Summary(chat_id=chat.chat_id, content="s", covers_message_id=messages[-1].id, updated_at=T0 + 5), None
    )
    sks = {i[SK] for i in await items_under(table, chat.chat_id)}
    assert {"META", "SUMMARY"} <= sks
    assert any(sk.startswith("MSG#") for sk in sks)
    assert any(sk.startswith("RUN#") for sk in sks)
    assert any(sk.startswith("REQ#") for sk in sks)

    # When Alice deletes it
    deleted = await store.delete_chat(chat.chat_id, ALICE)

    # Then nothing is left under its partition key, it is gone from reads, and the other chat is intact
    assert deleted is True
    assert await items_under(table, chat.chat_id) == []
    assert await store.get_chat(chat.chat_id, ALICE) is None
    assert await store.get_summary(chat.chat_id) is None
    assert await store.load_turn_context(chat.chat_id, ALICE) is None
    listed = await store.list_chats(ALICE, limit=10, cursor=None)
    assert [c.chat_id for c in listed.items] == [other.chat_id]
    assert len(await items_under(table, other.chat_id)) > 1


async def test_delete_chat_is_refused_for_a_foreign_user(store: TableStore) -> None:
    # Given Alice's chat with a turn
    chat = await store.create_chat(new_chat(ALICE))
    await seed_turn(store, chat, T0 + 10, replies=1)
    before = await items_under(store.table, chat.chat_id)

    # When Mallory tries to delete it
    deleted = await store.delete_chat(chat.chat_id, MALLORY)

    # Then it is refused and every item is still there
    assert deleted is False
    assert await items_under(store.table, chat.chat_id) == before
    assert await store.get_chat(chat.chat_id, ALICE) is not None


async def test_delete_chat_of_unknown_chat_returns_false(store: TableStore) -> None:
    # Given no chat / When deleting it / Then False
    assert await store.delete_chat("c_nothing", ALICE) is False


# ---------------------------------------------------------------- turns


async def test_begin_turn_writes_user_message_run_and_lease(store: TableStore) -> None:
    # Given a chat and a run
    chat = await store.create_chat(new_chat(ALICE))
    run = new_run(chat, started_at=T0 + 10)
    message = user_message(chat, run, "hello")

    # When the turn begins
    await store.begin_turn(chat, run, message, LEASE_MS)

    # Then the message, the RUNNING run, the request marker and the lease are all stored
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None
    assert loaded.active_run_id == run.run_id
    assert loaded.lease_expires_at == run.started_at + LEASE_MS
    assert loaded.message_count == 1
    page = await store.list_messages(chat.chat_id, ALICE, limit=10, cursor=None)
    assert page.items == [message]
    stored_run = await store.get_run(chat.chat_id, run.run_id)
    assert stored_run == run
    assert stored_run is not None and stored_run.status == RunStatus.RUNNING
    marker = await store.table.get(it.request_key(chat.chat_id, run.request_id))
    assert marker is not None and marker["runId"] == run.run_id


async def test_begin_turn_while_lease_held_raises_run_in_progress_and_writes_nothing(store: TableStore) -> None:
    # Given a turn holding the lease
    chat = await store.create_chat(new_chat(ALICE))
    first = new_run(chat, started_at=T0 + 10)
    await store.begin_turn(chat, first, user_message(chat, first, "one"), LEASE_MS)
    before = await items_under(store.table, chat.chat_id)

    # When a second turn (another request) begins before the lease expires, even at the exact expiry
    for started in (T0 + 20, first.started_at + LEASE_MS):
        second = new_run(chat, started_at=started)
        with pytest.raises(RunInProgress):
            await store.begin_turn(chat, second, user_message(chat, second, "two"), LEASE_MS)

        # Then nothing of it was written: same items, same count, no run, no marker
        assert await items_under(store.table, chat.chat_id) == before
        assert await store.get_run(chat.chat_id, second.run_id) is None
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None and loaded.message_count == 1 and loaded.active_run_id == first.run_id


async def test_begin_turn_after_the_lease_expired_takes_it_over(store: TableStore) -> None:
    # Given a turn whose lease has expired (a crashed run)
    chat = await store.create_chat(new_chat(ALICE))
    dead = new_run(chat, started_at=T0 + 10)
    await store.begin_turn(chat, dead, user_message(chat, dead, "one"), LEASE_MS)

    # When a new turn starts after leaseExpiresAt
    fresh = new_run(chat, started_at=dead.started_at + LEASE_MS + 1)
    await store.begin_turn(chat, fresh, user_message(chat, fresh, "two"), LEASE_MS)

    # Then the new turn holds the lease and both user messages are stored
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None
    assert loaded.active_run_id == fresh.run_id
    assert loaded.lease_expires_at == fresh.started_at + LEASE_MS
    assert loaded.message_count == 2
    assert await store.get_run(chat.chat_id, fresh.run_id) == fresh


async def test_begin_turn_with_a_seen_request_id_raises_duplicate_request_with_the_earlier_run(
    store: TableStore,
) -> None:
    # Given a turn for request R that is still running, then one that completed
    chat = await store.create_chat(new_chat(ALICE))
    first = new_run(chat, started_at=T0 + 10, request_id="req-R")
    await store.begin_turn(chat, first, user_message(chat, first, "one"), LEASE_MS)

    # When the same requestId arrives while it runs
    again = new_run(chat, started_at=T0 + 20, request_id="req-R")
    with pytest.raises(DuplicateRequest) as running:
        await store.begin_turn(chat, again, user_message(chat, again, "one"), LEASE_MS)

    # Then the duplicate carries the running run (not RunInProgress) and nothing was written
    assert running.value.run == first
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None and loaded.message_count == 1

    # When it completes and the same requestId arrives again after the lease
    done = completed(first, T0 + 30, answer="forty-two")
    await store.finish_turn(done, [assistant_message(chat, first, "forty-two", T0 + 30)], T0 + 30)
    late = new_run(chat, started_at=T0 + 10 * LEASE_MS, request_id="req-R")
    with pytest.raises(DuplicateRequest) as finished:
        await store.begin_turn(chat, late, user_message(chat, late, "one"), LEASE_MS)

    # Then the duplicate carries the completed run with its stored result
    assert finished.value.run == done
    assert finished.value.run.result is not None
    assert finished.value.run.result.assistant_message == "forty-two"
    assert await store.get_run(chat.chat_id, late.run_id) is None
    # And its request marker names it to a reader (one that was never seen names nothing)
    assert await store.run_for_request(chat.chat_id, "req-R") == done
    assert await store.run_for_request(chat.chat_id, "req-unseen") is None


async def test_finish_turn_persists_messages_run_and_releases_the_lease(store: TableStore) -> None:
    # Given a running turn in the older of two chats
    chat = await store.create_chat(new_chat(ALICE, at=T0))
    newer = await store.create_chat(new_chat(ALICE, at=T0 + 5))
    run = new_run(chat, started_at=T0 + 10)
    question = user_message(chat, run, "weather?")
    await store.begin_turn(chat, run, question, LEASE_MS)
    call = ToolCall(id="call_1", name="weather", arguments='{"city":"Oslo"}')
    produced = [
        Message(
            id=sortable_id(T0 + 11),
            chat_id=chat.chat_id,
            role=Role.ASSISTANT,
            tool_calls=[call],
            run_id=run.run_id,
            created_at=T0 + 11,
        ),
        Message(
            id=sortable_id(T0 + 12),
            chat_id=chat.chat_id,
            role=Role.TOOL,
            content='{"temp": 3}',
            tool_call_id="call_1",
            tool_name="weather",
            run_id=run.run_id,
            created_at=T0 + 12,
        ),
        assistant_message(chat, run, "It is 3 degrees in Oslo.", T0 + 13),
    ]
    done = run.model_copy(
        update={
            "status": RunStatus.COMPLETED,
            "ended_at": T0 + 13,
            "first_token_ms": 42,
            "usage": Usage(prompt_tokens=321, completion_tokens=17),
            "result": TurnResult(
                request_id=run.request_id,
                assistant_message="It is 3 degrees in Oslo.",
                tool_calls=[ToolCallRecord(id="call_1", tool_name="weather", status=ToolStatus.OK, duration_ms=5)],
            ),
        }
    )

    # When the turn finishes
    await store.finish_turn(done, produced, activity_at=T0 + 14)

    # Then the messages are stored in order after the question
    page = await store.list_messages(chat.chat_id, ALICE, limit=10, cursor=None)
    assert page.items == [question, *produced]
    # And the run is stored with its status, usage and result
    stored = await store.get_run(chat.chat_id, run.run_id)
    assert stored == done
    assert stored is not None and stored.usage.prompt_tokens == 321 and stored.result is not None
    # And the lease is released, activity and count updated
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None
    assert loaded.active_run_id is None and loaded.lease_expires_at is None
    assert loaded.last_activity_at == T0 + 14
    assert loaded.message_count == 4
    # And the listing now shows this chat first
    listed = await store.list_chats(ALICE, limit=10, cursor=None)
    assert [c.chat_id for c in listed.items] == [chat.chat_id, newer.chat_id]


async def test_finish_turn_after_a_takeover_keeps_messages_and_the_other_runs_lease(store: TableStore) -> None:
    # Given a slow turn whose lease expired and was taken by a newer turn
    chat = await store.create_chat(new_chat(ALICE))
    slow = new_run(chat, started_at=T0 + 10)
    await store.begin_turn(chat, slow, user_message(chat, slow, "slow question"), LEASE_MS)
    newer = new_run(chat, started_at=slow.started_at + LEASE_MS + 1)
    await store.begin_turn(chat, newer, user_message(chat, newer, "new question"), LEASE_MS)

    # When the slow turn finishes afterwards
    late_answer = assistant_message(chat, slow, "late answer", newer.started_at + 5)
    await store.finish_turn(completed(slow, newer.started_at + 5), [late_answer], newer.started_at + 5)

    # Then its message and run are stored, and the newer run still holds its lease
    page = await store.list_messages(chat.chat_id, ALICE, limit=10, cursor=None)
    assert late_answer in page.items
    stored = await store.get_run(chat.chat_id, slow.run_id)
    assert stored is not None and stored.status == RunStatus.COMPLETED
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None
    assert loaded.active_run_id == newer.run_id
    assert loaded.lease_expires_at == newer.started_at + LEASE_MS
    assert loaded.message_count == 3
    assert loaded.last_activity_at == newer.started_at + 5


async def test_finish_turn_after_the_chat_was_deleted_leaves_nothing_behind(store: TableStore) -> None:
    # Given a running turn whose chat is deleted while it runs
    chat = await store.create_chat(new_chat(ALICE))
    run = new_run(chat, started_at=T0 + 10)
    await store.begin_turn(chat, run, user_message(chat, run, "question"), LEASE_MS)
    assert await store.delete_chat(chat.chat_id, ALICE) is True

    # When the turn finishes afterwards
    answer = assistant_message(chat, run, "answer", T0 + 20)
    await store.finish_turn(completed(run, T0 + 20), [answer], T0 + 20)

    # Then no ownerless META, message or run is resurrected under the deleted chat
    assert await items_under(store.table, chat.chat_id) == []
    assert await store.list_chats(ALICE, limit=10, cursor=None) == ChatPage([], None)


async def test_restart_turn_after_a_failed_run_repoints_the_request_marker(store: TableStore) -> None:
    # Given a request whose run failed
    chat = await store.create_chat(new_chat(ALICE))
    failed = new_run(chat, started_at=T0 + 10, request_id="req-F")
    await store.begin_turn(chat, failed, user_message(chat, failed, "try"), LEASE_MS)
    failed_done = failed.model_copy(update={"status": RunStatus.FAILED, "error_code": "llm_unavailable"})
    await store.finish_turn(failed_done, [], T0 + 11)
    retry = new_run(chat, started_at=T0 + 20, request_id="req-F")
    with pytest.raises(DuplicateRequest) as dup:
        await store.begin_turn(chat, retry, user_message(chat, retry, "try"), LEASE_MS)
    assert dup.value.run.status == RunStatus.FAILED

    # When the turn is restarted for the same request
    await store.restart_turn(chat, dup.value.run, retry, LEASE_MS)

    # Then the marker points at the new run, which holds the lease; the message is not duplicated
    marker = await store.table.get(it.request_key(chat.chat_id, "req-F"))
    assert marker is not None and marker["runId"] == retry.run_id
    assert await store.get_run(chat.chat_id, retry.run_id) == retry
    loaded = await store.get_chat(chat.chat_id, ALICE)
    assert loaded is not None
    assert loaded.active_run_id == retry.run_id and loaded.message_count == 1
    # And a further duplicate now reports the new run
    third = new_run(chat, started_at=T0 + 30, request_id="req-F")
    with pytest.raises(DuplicateRequest) as again:
        await store.begin_turn(chat, third, user_message(chat, third, "try"), LEASE_MS)
    assert again.value.run.run_id == retry.run_id


# ---------------------------------------------------------------- the budget reservation a begin carries

DAY_S = T0 // 1000


def _budget(store: TableStore, budget: int, reserve: int) -> UsageMeter:
    return UsageMeter(
        store.table, make_settings(AGENT_USAGE_DAILY_TOKEN_BUDGET=budget, AGENT_USAGE_RESERVE_TOKENS=reserve)
    )


async def _reservation(meter: UsageMeter) -> UpdateOp:
    write = (await meter.budget.plan(ALICE, "test-model", DAY_S, ZoneInfo("UTC"))).write
    assert write is not None
    return write


async def _reserved(store: TableStore) -> int:
    item = await store.table.get(it.budget_key(ALICE, "2023-11-14"))  # T0's UTC day
    return int((item or {}).get("tokens", 0))


async def test_begin_turn_commits_the_reservation_with_the_lease_or_is_refused_writing_nothing(
    store: TableStore,
) -> None:
    # Given a budget of 150 tokens, turns that reserve 100
    meter = _budget(store, budget=150, reserve=100)
    chat = await store.create_chat(new_chat(ALICE))
    first = new_run(chat, started_at=T0 + 10)
    # When a turn begins with its reservation
    await store.begin_turn(chat, first, user_message(chat, first, "one"), LEASE_MS, None, await _reservation(meter))
    # Then the reservation is written with the lease, the message and the run
    assert await _reserved(store) == 100
    assert await store.get_run(chat.chat_id, first.run_id) == first
    await store.finish_turn(completed(first, T0 + 20), [], T0 + 20)
    # When the next turn's reservation finds the day at 100 (not below 150: admitted) and the one after at 200
    second = new_run(chat, started_at=T0 + 30)
    await store.begin_turn(chat, second, user_message(chat, second, "two"), LEASE_MS, None, await _reservation(meter))
    await store.finish_turn(completed(second, T0 + 40), [], T0 + 40)
    before = await items_under(store.table, chat.chat_id)
    third = new_run(chat, started_at=T0 + 50)
    with pytest.raises(ReservationRefused):
        await store.begin_turn(
            chat, third, user_message(chat, third, "three"), LEASE_MS, None, await _reservation(meter)
        )
    # Then it is refused and nothing of it is written: no message, run, marker or lease, the budget unchanged
    assert await items_under(store.table, chat.chat_id) == before
    assert await store.get_run(chat.chat_id, third.run_id) is None
    assert await _reserved(store) == 200
    # And a restart of a failed request is held to the budget alike: refused, its marker left as it was
    failed = completed(second, T0 + 40).model_copy(update={"status": RunStatus.FAILED, "result": None})
    retry = new_run(chat, started_at=T0 + 60, request_id=second.request_id)
    with pytest.raises(ReservationRefused):
        await store.restart_turn(chat, failed, retry, LEASE_MS, await _reservation(meter))
    marker = await store.table.get(it.request_key(chat.chat_id, second.request_id))
    assert marker is not None and marker["runId"] == second.run_id
    assert await store.get_run(chat.chat_id, retry.run_id) is None and await _reserved(store) == 200


async def test_a_refused_reservation_is_told_apart_from_its_own_commit_a_duplicate_and_a_held_lease(
    store: TableStore,
) -> None:
    # Given a budget that one reservation fills, and a turn that began with it
    meter = _budget(store, budget=100, reserve=100)
    chat = await store.create_chat(new_chat(ALICE))
    run = new_run(chat, started_at=T0 + 10, request_id="req-R")
    message = user_message(chat, run, "one")
    await store.begin_turn(chat, run, message, LEASE_MS, None, await _reservation(meter))
    # When the same begin is tried again (its first answer lost): every condition fails, its reservation's too
    await store.begin_turn(chat, run, message, LEASE_MS, None, await _reservation(meter))
    # Then it recognises its own commit: no refusal, the reservation counted once
    assert await _reserved(store) == 100
    # When another run comes with the same requestId: the duplicate, not the budget, answers it
    again = new_run(chat, started_at=T0 + 20, request_id="req-R")
    with pytest.raises(DuplicateRequest) as duplicate:
        await store.begin_turn(chat, again, user_message(chat, again, "one"), LEASE_MS, None, await _reservation(meter))
    assert duplicate.value.run.run_id == run.run_id
    # When a new request comes while the lease is held and the budget is spent: the budget answers (429 first)
    other = new_run(chat, started_at=T0 + 30)
    with pytest.raises(ReservationRefused):
        await store.begin_turn(chat, other, user_message(chat, other, "two"), LEASE_MS, None, await _reservation(meter))
    # And without a reservation the held lease answers, as ever
    with pytest.raises(RunInProgress):
        await store.begin_turn(chat, other, user_message(chat, other, "two"), LEASE_MS)
    assert await _reserved(store) == 100


async def test_a_chat_opened_with_its_turns_reservation_is_refused_writing_nothing(store: TableStore) -> None:
    # Given a budget one reservation fills
    meter = _budget(store, budget=100, reserve=100)
    # When a first message opens a chat with its reservation (with its requestId, and without one)
    opened = await store.create_chat(new_chat(ALICE), request_id="first-1", reservation=await _reservation(meter))
    # Then both are written
    assert await store.get_chat(opened.chat_id, ALICE) is not None and await _reserved(store) == 100
    # When the same first message is sent again: its chat is found, and no reservation is written with nothing
    again = await store.create_chat(new_chat(ALICE), request_id="first-1", reservation=await _reservation(meter))
    assert again.chat_id == opened.chat_id and await _reserved(store) == 100
    # When other first messages come, the budget spent: refused, and no chat, no marker is written
    for request_id in ("first-2", None):
        refused = new_chat(ALICE)
        with pytest.raises(ReservationRefused):
            await store.create_chat(refused, request_id=request_id, reservation=await _reservation(meter))
        assert await items_under(store.table, refused.chat_id) == []
    assert await store.table.get(it.first_request_key(ALICE, "first-2")) is None
    assert [c.chat_id for c in (await store.list_chats(ALICE, 10, None)).items] == [opened.chat_id]
    assert await _reserved(store) == 100


# ---------------------------------------------------------------- messages


async def test_list_messages_oldest_first_with_pagination(store: TableStore) -> None:
    # Given a chat with five messages
    chat = await store.create_chat(new_chat(ALICE))
    messages = await seed_turn(store, chat, T0 + 10, replies=4)

    # When listing two at a time
    pages: list[list[Message]] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(chat.chat_id, ALICE, limit=2, cursor=cursor)
        pages.append(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break

    # Then the pages are 2, 2, 1 long, oldest first, every message once
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [m for p in pages for m in p] == messages


async def test_list_messages_rejects_a_cursor_from_another_chat(store: TableStore) -> None:
    # Given a cursor from another chat's listing
    chat = await store.create_chat(new_chat(ALICE))
    other = await store.create_chat(new_chat(ALICE))
    await seed_turn(store, other, T0 + 10, replies=3)
    page = await store.list_messages(other.chat_id, ALICE, limit=1, cursor=None)
    assert page.next_cursor is not None

    # When it is used on this chat / Then it is rejected
    with pytest.raises(InvalidRequest):
        await store.list_messages(chat.chat_id, ALICE, limit=1, cursor=page.next_cursor)


@pytest.mark.parametrize(
    ("after", "limit", "expected", "truncated"),
    [
        (1, 10, [2, 3, 4, 5], False),
        (1, 4, [2, 3, 4, 5], False),  # exactly `limit` after the cover: nothing left out
        (1, 2, [4, 5], True),
        (1, 3, [3, 4, 5], True),
        (None, 6, [0, 1, 2, 3, 4, 5], False),
        (None, 5, [1, 2, 3, 4, 5], True),
        (5, 3, [], False),
    ],
)
async def test_recent_messages_after_a_cover_id(
    store: TableStore, after: int | None, limit: int, expected: list[int], truncated: bool
) -> None:
    # Given six messages m0..m5
    chat = await store.create_chat(new_chat(ALICE))
    messages = await seed_turn(store, chat, T0 + 10, replies=5)

    # When reading the newest `limit` after message `after`
    after_id = messages[after].id if after is not None else None
    recent = await store.recent_messages(chat.chat_id, after_id, limit)

    # Then only later messages come back, oldest first, and `truncated` says whether some were left out
    assert recent.items == [messages[i] for i in expected]
    assert recent.truncated is truncated


async def test_messages_between_bounds(store: TableStore) -> None:
    # Given six messages m0..m5
    chat = await store.create_chat(new_chat(ALICE))
    m = await seed_turn(store, chat, T0 + 10, replies=5)

    # When / Then: after is exclusive, upto is inclusive, None is open
    assert await store.messages_between(chat.chat_id, m[1].id, m[3].id) == m[2:4]
    assert await store.messages_between(chat.chat_id, None, m[2].id) == m[:3]
    assert await store.messages_between(chat.chat_id, m[3].id, None) == m[4:]
    assert await store.messages_between(chat.chat_id, None, None) == m
    assert await store.messages_between(chat.chat_id, m[5].id, None) == []


# ---------------------------------------------------------------- summary and turn context


async def test_replace_summary_is_a_versioned_compare_and_swap(store: TableStore) -> None:
    # Given a chat without a summary
    chat = await store.create_chat(new_chat(ALICE))
    msgs = await seed_turn(store, chat, T0 + 10, replies=3)
    first = Summary(chat_id=chat.chat_id, content="v1", covers_message_id=msgs[1].id, covered_count=2, updated_at=1)

    # When the first summary is written with no expected version / written again the same way
    assert await store.replace_summary(first, None) is True
    assert await store.replace_summary(first.model_copy(update={"content": "other v1"}), None) is False
    assert await store.get_summary(chat.chat_id) == first

    # When it is replaced with the right expected version
    second = Summary(
        chat_id=chat.chat_id, content="v2", covers_message_id=msgs[2].id, covered_count=3, updated_at=2, version=2
    )
    assert await store.replace_summary(second, 1) is True

    # Then exactly one SUMMARY item exists and it is the new one
    summaries = [i for i in await items_under(store.table, chat.chat_id) if i[SK] == it.SUMMARY]
    assert len(summaries) == 1
    assert await store.get_summary(chat.chat_id) == second

    # When a stale writer replaces with the old version
    stale = second.model_copy(update={"content": "stale", "version": 2})
    assert await store.replace_summary(stale, 1) is False

    # Then the summary is unchanged
    assert await store.get_summary(chat.chat_id) == second


async def test_load_turn_context_returns_chat_and_summary(store: TableStore) -> None:
    # Given a chat without a summary, then with one
    chat = await store.create_chat(new_chat(ALICE))
    context = await store.load_turn_context(chat.chat_id, ALICE)
    assert context is not None and context.chat == chat and context.summary is None
    summary = Summary(chat_id=chat.chat_id, content="remember Oslo", covers_message_id="0", updated_at=T0)
    await store.replace_summary(summary, None)

    # When the owner loads the turn context
    context = await store.load_turn_context(chat.chat_id, ALICE)

    # Then it has both the chat and the summary
    assert context is not None
    assert context.chat == chat
    assert context.summary == summary


async def test_load_turn_context_for_a_foreign_user_or_unknown_chat_is_none(store: TableStore) -> None:
    # Given Alice's chat with a summary
    chat = await store.create_chat(new_chat(ALICE))
    await store.replace_summary(
        Summary(chat_id=chat.chat_id, content="secret", covers_message_id="0", updated_at=T0), None
    )

    # When Mallory loads it, or anyone loads an unknown chat / Then None
    assert await store.load_turn_context(chat.chat_id, MALLORY) is None
    assert await store.load_turn_context("c_unknown", ALICE) is None


# ---------------------------------------------------------------- DynamoDB call counts (moto only)


def _count_calls(table: DynamoTable) -> tuple[list[str], Callable[[], None]]:
    """Record every DynamoDB operation name the table's client sends; returns (names, unregister)."""
    calls: list[str] = []

    def record(event_name: str, **_: Any) -> None:
        calls.append(event_name.rsplit(".", 1)[-1])

    table.client.meta.events.register("before-call.dynamodb.*", record)

    def stop() -> None:
        table.client.meta.events.unregister("before-call.dynamodb.*", record)

    return calls, stop


async def test_load_turn_context_is_one_batch_get_item(moto_table: DynamoTable) -> None:
    # Given a chat with a summary on DynamoDB
    store = TableStore(moto_table)
    chat = await store.create_chat(new_chat(ALICE))
    await store.replace_summary(Summary(chat_id=chat.chat_id, content="s", covers_message_id="0", updated_at=T0), None)
    calls, stop = _count_calls(moto_table)

    # When the turn context is loaded
    try:
        context = await store.load_turn_context(chat.chat_id, ALICE)
    finally:
        stop()

    # Then it took exactly one BatchGetItem
    assert context is not None and context.summary is not None
    assert calls == ["BatchGetItem"]


async def test_begin_turn_is_one_transact_write_items(moto_table: DynamoTable) -> None:
    # Given a chat on DynamoDB
    store = TableStore(moto_table)
    chat = await store.create_chat(new_chat(ALICE))
    run = new_run(chat, started_at=T0 + 10)
    calls, stop = _count_calls(moto_table)

    # When a turn begins
    try:
        await store.begin_turn(chat, run, user_message(chat, run, "hi"), LEASE_MS)
    finally:
        stop()

    # Then it took exactly one TransactWriteItems
    assert calls == ["TransactWriteItems"]


async def test_setting_the_profile_zone_creates_the_profile_or_keeps_its_facts(store: TableStore) -> None:
    from agent_core.domain.models import Profile, ProfileFact

    created = await store.set_profile_timezone("user-new", "Europe/Paris", T0)
    assert (created.user_id, created.timezone, created.facts) == ("user-new", "Europe/Paris", [])
    fact = ProfileFact(aspect="interests", key="travel", value="Japan", source_date="2026-01-07")
    await store.put_profile(Profile(user_id=ALICE, facts=[fact], updated_at=T0))
    changed = await store.set_profile_timezone(ALICE, "America/New_York", T0 + 1)
    assert changed.facts == [fact] and changed.timezone == "America/New_York"
    stored = await store.get_profile(ALICE)
    assert stored is not None and stored.timezone == "America/New_York" and stored.facts == [fact]
    assert stored.updated_at == T0 + 1
