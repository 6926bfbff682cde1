"""A run whose process dies while it waits on people goes on from its checkpoint (runtime/continuation.py).

In-process: the "dead" instance is a context whose table stops answering at the crash (every call raises, so
none of the run's own clean-up lands: no end stored, no wait closed, no lease released or renewed), and its
run task is dropped. The living instance shares the real table. Each table kind (memory, moto, SQLite) runs
the store-level checks; the whole-run cases run on SQLite and moto.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_core.api.routes.submit import answer_approval, answer_params
from agent_core.context import AppContext
from agent_core.domain.ids import now_ms
from agent_core.domain.jobs import ContinueRunJob
from agent_core.domain.models import Message, Role, Run, RunStatus, Wait, WaitKind, WaitStatus
from agent_core.runtime.continuation import continue_run
from agent_core.runtime.event_log import EventLogWriter
from agent_core.runtime.interrupted import WaitingRuns, settle_interrupted_runs
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store import items as it
from agent_core.store.base import LeaseTaken
from agent_core.store.run_log import RunLogStore
from agent_core.store.table import Table
from tests.support.approvals import approval_context, crash_while_waiting, decision, live_run, run_writer, writes
from tests.support.recorded_queue import RecordedQueue
from tests.support.wait import apoll_until

USER = "u"


async def _expire_lease(table: Table, chat_id: str) -> None:
    """Two missed heartbeats later: the dead run's lease has run out."""
    meta = await table.get(it.meta_key(chat_id))
    assert meta is not None
    await table.put({**meta, "leaseExpiresAt": now_ms() - 1})


async def _run(context: AppContext, event: dict[str, Any]) -> Run:
    run = await context.deps.turns.get_run(event["chatId"], event["runId"])
    assert run is not None
    return run


@pytest.fixture(params=["moto", "sqlite"])
def durable_table(request: pytest.FixtureRequest) -> Table:
    table: Table = request.getfixturevalue(f"{request.param}_table")
    return table


async def test_an_approval_answered_after_the_crash_continues_the_run_on_another_instance(
    durable_table: Table,
) -> None:
    living, tool, seen = await crash_while_waiting(durable_table, ("c1", "c2"))
    first = seen[0]
    run_id, chat_id = first["runId"], first["chatId"]
    # While the dead run's lease has not run out, nothing is continued: it may still be alive
    assert await continue_run(living.deps, chat_id, run_id, USER) == "waiting"
    await _expire_lease(durable_table, chat_id)

    # When both approvals come (one yes, one no) to the living instance
    assert await answer_approval(living.deps, run_id, "c1", decision(True)) == {"accepted": True, "status": "accepted"}
    assert await answer_approval(living.deps, run_id, "c2", decision(False, reason="no")) == {
        "accepted": True,
        "status": "accepted",
    }

    # Then the run goes on by itself (the answer queued its continuation) and completes
    async def ended() -> bool:
        return (await _run(living, first)).status == RunStatus.COMPLETED

    await apoll_until(ended, "the continued run's end")
    assert tool.executions == ["c1"]
    run = await _run(living, first)
    assert run.result is not None and run.result.assistant_message == "done"
    # Its replay is the whole run once: the first process's events, then the continuation's, seqs in order
    snapshot = run.snapshot or []
    assert [e["seq"] for e in snapshot] == sorted({e["seq"] for e in snapshot})
    assert snapshot[0]["type"] == "request.query" and snapshot[-1]["type"] == "run.complete"
    results = {e["toolId"]: e["status"] for e in snapshot if e["type"] == "tool.result"}
    assert results == {"c1": "ok", "c2": "denied"}
    # Its log continues the stream the client had, from the next seq (its last batch lands as the run closes)
    run_log = living.deps.run_log
    assert run_log is not None

    async def logged() -> list[dict[str, Any]] | None:
        events = (await run_log.read(run_id, USER, seen[-1]["seq"], now_ms() // 1000)).events
        return events if events and events[-1]["type"] == "run.complete" else None

    events = await apoll_until(logged, "the continued run's logged end")
    assert events[0]["seq"] == seen[-1]["seq"] + 1
    # The stored messages answer each call once, after the call
    messages = [m for m in (await living.deps.chats.recent_messages(chat_id, None, 50)).items if m.run_id == run_id]
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]
    # And the chat's lease is free for the next turn
    meta = await durable_table.get(it.meta_key(chat_id))
    assert meta is not None and "activeRunId" not in meta and it.LEASE_HOLDER not in meta


async def test_an_approval_accepted_just_before_the_crash_runs_once_when_the_idle_pass_continues_it(
    durable_table: Table,
) -> None:
    living, tool, seen = await crash_while_waiting(durable_table, ("c1",))
    first = seen[0]
    run_id, chat_id = first["runId"], first["chatId"]
    # The answer was accepted while the run still held its lease, then its process died before acting on it
    assert await living.deps.waits.decide_wait(run_id, "c1", decision(True))
    await _expire_lease(durable_table, chat_id)
    queue = RecordedQueue()
    waiting = WaitingRuns(living.deps.waits, living.deps.checkpoints, queue)  # type: ignore[arg-type]
    # The idle pass does not settle it: it queues its continuation
    assert await settle_interrupted_runs(living.deps.turns, now_ms(), expired_before=now_ms(), waiting=waiting) == 0
    assert queue.jobs == [ContinueRunJob(chat_id=chat_id, run_id=run_id, user_id=USER)]
    # Two instances take the job at once: one continues, the other finds the lease taken
    outcomes = await asyncio.gather(*(continue_run(living.deps, chat_id, run_id, USER) for _ in range(2)))
    assert sorted(outcomes) == ["continued", "held"]
    assert tool.executions == ["c1"]
    assert (await _run(living, first)).status == RunStatus.COMPLETED


async def test_a_dead_run_still_waiting_is_left_for_its_answer_and_a_stopped_run_without_checkpoint_is_settled(
    durable_table: Table,
) -> None:
    living, _tool, seen = await crash_while_waiting(durable_table, ("c1",))
    first = seen[0]
    await _expire_lease(durable_table, first["chatId"])
    queue = RecordedQueue()
    waiting = WaitingRuns(living.deps.waits, living.deps.checkpoints, queue)  # type: ignore[arg-type]
    assert await settle_interrupted_runs(living.deps.turns, now_ms(), expired_before=now_ms(), waiting=waiting) == 0
    assert queue.jobs == [] and (await _run(living, first)).status == RunStatus.RUNNING
    # Without the checkpoint (a run that waited on nobody, or one from before checkpoints), it is settled
    await durable_table.delete(it.checkpoint_key(first["runId"]))
    assert await settle_interrupted_runs(living.deps.turns, now_ms(), expired_before=now_ms(), waiting=waiting) == 1
    run = await _run(living, first)
    assert (run.status, run.error_code) == (RunStatus.FAILED, "interrupted")
    # And an answer then is refused with the run's status
    assert await answer_approval(living.deps, first["runId"], "c1", decision(True)) == {
        "accepted": False,
        "status": "failed",
    }


async def test_the_first_process_still_alive_stops_and_stores_nothing_once_another_continued_its_run(
    durable_table: Table,
) -> None:
    # Given a run waiting on an approval in a process with a quick heartbeat
    context, tool = approval_context(writes("c1"), durable_table, AGENT_RUN_HEARTBEAT_MS="100")
    events: list[dict[str, Any]] = []
    asked = asyncio.Event()

    async def person(event: dict[str, Any]) -> None:
        events.append(event)
        if event["type"] == "tool.approval":
            asked.set()

    run = asyncio.create_task(run_writer(context, "write a note", person))
    await asyncio.wait_for(asked.wait(), 30)
    chat_id, run_id = events[0]["chatId"], events[0]["runId"]
    # When another process takes its lease over (as a continuation does once it expired)
    meta = await durable_table.get(it.meta_key(chat_id))
    assert meta is not None
    await durable_table.put({**meta, "leaseExpiresAt": now_ms() + 60_000, it.LEASE_HOLDER: "another-process"})
    # Then at its next heartbeat it stops: its client is told the run goes on elsewhere, and nothing is stored
    await asyncio.wait_for(run, 30)
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "interrupted"
    assert "another process" in events[-1]["message"]
    stored = await context.deps.turns.get_run(chat_id, run_id)
    assert stored is not None and stored.status == RunStatus.RUNNING
    meta = await durable_table.get(it.meta_key(chat_id))
    assert meta is not None and meta["activeRunId"] == run_id and meta[it.LEASE_HOLDER] == "another-process"
    assert tool.executions == []


async def test_the_lease_of_a_continued_run_belongs_to_its_token(any_table: Table) -> None:
    run = await live_run(any_table, "r1", "c1", USER)
    context, _ = approval_context(writes("x"), any_table)
    turns = context.deps.turns
    now = now_ms()
    # A lease still running is not taken over; an expired one is, by one process only
    assert not await turns.take_over_lease("c1", "r1", now, now + 1000, "t1")
    await _expire_lease(any_table, "c1")
    assert await turns.take_over_lease("c1", "r1", now_ms(), now_ms() + 60_000, "t1")
    assert not await turns.take_over_lease("c1", "r1", now_ms(), now_ms() + 60_000, "t2")
    # Only the token renews it; the run's first process cannot
    assert not await turns.renew_lease("c1", "r1", now_ms() + 60_000)
    assert await turns.renew_lease("c1", "r1", now_ms() + 60_000, "t1")
    # The first process's end is refused (LeaseTaken: nothing written); the token's end releases the lease
    answer = Message(id="m1", chat_id="c1", role=Role.ASSISTANT, content="a", run_id="r1", created_at=now)
    run.status = RunStatus.COMPLETED
    with pytest.raises(LeaseTaken):
        await turns.finish_turn(run, [answer], now)
    assert (await turns.get_run("c1", "r1")).status == RunStatus.RUNNING  # type: ignore[union-attr]
    run.lease_holder = "t1"
    await turns.finish_turn(run, [answer], now)
    meta = await any_table.get(it.meta_key("c1"))
    assert meta is not None and "activeRunId" not in meta and it.LEASE_HOLDER not in meta


async def test_a_new_turn_on_a_lease_a_continuation_let_expire_holds_it_as_its_own(any_table: Table) -> None:
    await live_run(any_table, "r1", "c1", USER)
    context, _ = approval_context(writes("x"), any_table)
    await _expire_lease(any_table, "c1")
    assert await context.deps.turns.take_over_lease("c1", "r1", now_ms(), now_ms() - 1, "t1")  # then it died too
    prepared = await prepare_turn(
        context.deps, TurnRequest(user_id=USER, chat_id="c1", message="again", agent_key="writer")
    )
    assert isinstance(prepared, PreparedTurn)
    meta = await any_table.get(it.meta_key("c1"))
    assert meta is not None and meta["activeRunId"] == prepared.run.run_id and it.LEASE_HOLDER not in meta
    assert await context.deps.turns.renew_lease("c1", prepared.run.run_id, now_ms() + 60_000)


async def test_the_local_server_at_start_expires_a_dead_continuations_lease_so_an_answer_finds_it_stopped(
    any_table: Table,
) -> None:
    from agent_core.domain.checkpoint import RunCheckpoint
    from agent_core.domain.models import ToolCall

    await live_run(any_table, "r1", "c1", USER)
    context, _ = approval_context(writes("x"), any_table)
    deps = context.deps
    await deps.waits.create_wait(
        Wait(run_id="r1", tool_id="a1", user_id=USER, kind=WaitKind.APPROVAL, expires_at=now_ms() // 1000 + 60)
    )
    pending = [ToolCall(id="a1", name="write_note", arguments="{}")]
    await deps.checkpoints.put(RunCheckpoint(run_id="r1", user_id=USER, seq=3, pending=pending), now_ms() // 1000)  # type: ignore[union-attr]
    # A continuation took the run's lease under its token, then its process died too (the lease still runs)
    await _expire_lease(any_table, "c1")
    assert await deps.turns.take_over_lease("c1", "r1", now_ms(), now_ms() + 60_000, "t1")
    chat = await deps.chats.get_chat("c1", USER)
    assert chat is not None
    queue = RecordedQueue()
    waiting = WaitingRuns(deps.waits, deps.checkpoints, queue)  # type: ignore[arg-type]
    assert await waiting.keep(deps.turns, chat, sole_owner=True) == "waiting"
    meta = await any_table.get(it.meta_key("c1"))
    assert meta is not None and meta["leaseExpiresAt"] == 0 and meta["activeRunId"] == "r1"
    deps.work_queue = queue  # type: ignore[assignment]
    assert await answer_approval(deps, "r1", "a1", decision(True)) == {"accepted": True, "status": "accepted"}
    assert queue.jobs == [ContinueRunJob(chat_id="c1", run_id="r1", user_id=USER)]


async def test_an_approved_call_is_claimed_once(any_table: Table) -> None:
    context, _ = approval_context(writes("x"), any_table)
    waits = context.deps.waits
    wait = Wait(run_id="r1", tool_id="c1", user_id=USER, kind=WaitKind.APPROVAL, expires_at=now_ms() // 1000 + 60)
    await waits.create_wait(wait)
    assert not await waits.claim_wait("r1", "c1", now_ms())  # not decided yet
    assert await waits.decide_wait("r1", "c1", decision(True))
    claims = await asyncio.gather(*(waits.claim_wait("r1", "c1", now_ms()) for _ in range(3)))
    assert sorted(claims) == [False, False, True]
    denied = wait.model_copy(update={"tool_id": "c2"})
    await waits.create_wait(denied)
    assert await waits.decide_wait("r1", "c2", decision(False))
    assert not await waits.claim_wait("r1", "c2", now_ms())  # a denied call is never taken to run


async def test_answers_for_a_stopped_run_queue_its_continuation_only_with_a_checkpoint(any_table: Table) -> None:
    context, _ = approval_context(writes("x"), any_table)
    deps = context.deps
    queue = RecordedQueue()
    deps.work_queue = queue  # type: ignore[assignment]
    await live_run(any_table, "r1", "c1", USER)
    await _expire_lease(any_table, "c1")
    expires = now_ms() // 1000 + 60
    for tool_id, kind in (("a1", WaitKind.APPROVAL), ("f1", WaitKind.FRONTEND)):
        await deps.waits.create_wait(Wait(run_id="r1", tool_id=tool_id, user_id=USER, kind=kind, expires_at=expires))
    # Without a checkpoint, the approval of a stopped run is refused: nothing would act on it
    assert await answer_approval(deps, "r1", "a1", decision(True)) == {"accepted": False, "status": "interrupted"}
    assert (await deps.waits.get_wait("r1", "a1")).status == WaitStatus.WAITING  # type: ignore[union-attr]
    # With one that waits for the call, it is accepted and the run's continuation queued
    from agent_core.domain.checkpoint import RunCheckpoint
    from agent_core.domain.models import ToolCall

    pending = [ToolCall(id="a1", name="write_note", arguments="{}"), ToolCall(id="f1", name="pick", arguments="{}")]
    checkpoint = RunCheckpoint(run_id="r1", user_id=USER, seq=3, pending=pending)
    await deps.checkpoints.put(checkpoint, now_ms() // 1000)  # type: ignore[union-attr]
    assert await answer_approval(deps, "r1", "a1", decision(True)) == {"accepted": True, "status": "accepted"}
    assert await answer_params(deps, "r1", "f1", USER, {"pick": "red"}) == {"accepted": True, "status": "accepted"}
    job = ContinueRunJob(chat_id="c1", run_id="r1", user_id=USER)
    assert queue.jobs == [job, job]
    # Another user's answer matches nothing
    assert (await answer_approval(deps, "r1", "a1", decision(True, user="eve")))["accepted"] is False


async def test_a_flush_writes_every_buffered_event_before_it_returns(any_table: Table) -> None:
    log = RunLogStore(any_table, 3600)
    writer = EventLogWriter(log, "r1", USER, max_age_s=3600)  # nothing would be written by age
    from agent_core.domain.events import ContentDelta
    from agent_core.runtime.envelope import Envelope

    for seq in range(1, 4):
        writer.add(Envelope(ContentDelta(content_id="c", delta="x"), seq, 0, "r1", "c1", "q1"))
    assert await writer.flush()
    read = await log.read("r1", USER, 0, now_ms() // 1000)
    assert [e["seq"] for e in read.events] == [1, 2, 3]
    assert await writer.flush()  # nothing buffered: at once
    await writer.close()
