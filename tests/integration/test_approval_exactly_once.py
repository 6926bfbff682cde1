"""Exactly once: random sequences of answers to one approval (1,000 on SQLite, on moto 250 or APPROVAL_SEQUENCES),
counting executions.

Each sequence gates one call of a real tool that records its executions (`RecordingTool`), waits on the
approval through the runtime's own pieces (`ToolService.execute` awaiting `RunWaits`, the run's bridge over
the WAIT item) and answers it through the submit route's functions from several app instances over the same
table: approvals, denials, duplicates, concurrent answers (from several instances at once), late answers
(after the call ended), a timeout, a cancel (the store's flag, then what the run's cancel watch does: the
waiting call is cancelled and the run's waits closed) and instance restarts (an answering instance replaced by
a fresh context over the same table). Whatever the interleaving: no execution without an accepted approval,
never two executions, at most one accepted answer, and every refusal says why with a known status.
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core.api.routes.submit import answer_approval
from agent_core.context import AppContext, build_context
from agent_core.domain.ids import now_ms
from agent_core.domain.models import ApprovalDecision, ToolCall, ToolStatus, WaitStatus
from agent_core.runtime.approvals import RunWaits
from agent_core.store import items as it
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.table import Table
from agent_core.tools.base import ToolContext
from agent_core.tools.service import ToolExecution
from tests.support.approvals import RecordingTool, SerialClient, live_run
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings

# moto's in-process DynamoDB costs ~3 ms a call: it plays fewer sequences unless told (APPROVAL_SEQUENCES=1000
# ran both tables' thousand in 2.5 minutes on the shared machine; SQLite's thousand take ~15 s).
SEQUENCES = {"sqlite": 1000, "moto": int(os.environ.get("APPROVAL_SEQUENCES", "250"))}
BATCH = 20
REFUSALS = {"already_decided", "expired", "cancelling", "run_ended", "unmatched"}
OPS = ("approve", "deny", "duplicate", "concurrent", "pause", "cancel", "restart", "other_user")
LONG_MS = 60_000  # bounded: such a sequence ends with an answer or a cancel


def _context(table: Table, audit: list[dict[str, Any]]) -> AppContext:
    settings = make_settings(AGENT_STORAGE="aws", AGENT_TOOL_APPROVAL='{"write_note": "always"}')
    context = build_context(settings, table=table, llm=ScriptedLlm(), audit=audit.append)
    context.deps.tools.registry.register(RecordingTool())
    return context


@dataclass
class Sequence:
    """One random sequence's answers and what they got."""

    rng: random.Random
    run_id: str
    chat_id: str
    answers: list[tuple[ApprovalDecision, dict[str, Any]]] = field(default_factory=list)
    cancelled: bool = False
    last: ApprovalDecision | None = None


async def _answer(instance: AppContext, seq: Sequence, approved: bool, user: str = "alice") -> None:
    decision = ApprovalDecision(approved=approved, by=user, at_ms=now_ms(), reason=f"r{seq.rng.randint(0, 9)}")
    seq.last = decision
    got = await answer_approval(instance.deps, seq.run_id, "call", decision)
    seq.answers.append((decision, got))


async def _play(
    seq: Sequence,
    instances: list[AppContext],
    table: Table,
    audit: list[dict[str, Any]],
    task: asyncio.Task[ToolExecution],
    waits: RunWaits,
) -> None:
    for _ in range(seq.rng.randint(1, 5)):
        await _play_one(seq.rng.choice(OPS), seq, instances, table, audit, task, waits)


async def _play_one(
    op: str,
    seq: Sequence,
    instances: list[AppContext],
    table: Table,
    audit: list[dict[str, Any]],
    task: asyncio.Task[ToolExecution],
    waits: RunWaits,
) -> None:
    rng = seq.rng
    instance = rng.choice(instances)
    if op in ("approve", "deny"):
        await _answer(instance, seq, op == "approve")
    elif op == "other_user":
        await _answer(instance, seq, True, user="mallory")
    elif op == "duplicate" and seq.last is not None:
        await _answer(instance, seq, seq.last.approved)
    elif op == "concurrent":
        await asyncio.gather(
            *(_answer(rng.choice(instances), seq, rng.random() < 0.5) for _ in range(rng.randint(2, 4)))
        )
    elif op == "pause":  # lets the wait poll, decide, or time out between answers
        await asyncio.wait({task}, timeout=rng.uniform(0, 0.02))
    elif op == "cancel" and not seq.cancelled:
        seq.cancelled = True
        await instance.deps.turns.request_cancel(seq.chat_id, seq.run_id)
        task.cancel()  # what the run's cancel watch does to the step it runs ...
        await asyncio.wait({task})
        await waits.close()  # ... and the run's end, to its waits
    elif op == "restart":
        instances[rng.randrange(len(instances))] = _context(table, audit)


async def _one(
    seed: int, run_side: AppContext, instances: list[AppContext], table: Table, audit: list[dict[str, Any]]
) -> tuple[Sequence, ToolExecution | None, RecordingTool]:
    rng = random.Random(seed)
    deps = run_side.deps
    # A running run's items (its RUN item, pointer and chat lease: what cancel and an answer read), put directly:
    # a turn's transaction would make moto copy the whole table each time.
    run = await live_run(table, f"run-{seed}", f"c_seq{seed}", "alice")
    seq = Sequence(rng, run.run_id, run.chat_id)
    tool = RecordingTool()  # a recorder of its own: executions are this sequence's alone
    service = deps.tools.scoped(deps.tools.registry.extended([tool]), {"write_note"})
    # A short wait (10-50 ms) times out unless an answer comes first; a long one only ends by an answer or a
    # cancel (the sequence ends with one): on a slow machine every short one may time out, the long ones still
    # cover approvals, denials and cancels
    short = rng.random() < 0.4
    timeout_ms = rng.randint(10, 50) if short else LONG_MS
    service.settings = deps.settings.model_copy(update={"tool_approval_timeout_ms": timeout_ms})
    waits = RunWaits(deps.waits, run.run_id, "alice")
    waits.first_poll_s = waits.poll_s = 0.01
    call = ToolCall(id="call", name="write_note", arguments='{"path": "p"}')
    assert service.approval_reason(call) is not None
    await waits.open_approval(call.id, call.name, {"path": "p"}, "asked", service.settings.tool_approval_timeout_ms)
    ctx = ToolContext(
        request_id="q",
        conversation_id=run.chat_id,
        user_id="alice",
        settings=deps.settings,
        timezone="UTC",
        now=datetime.now(UTC),
        run_id=run.run_id,
        approvals=waits,
    )
    task = asyncio.create_task(service.execute(call, ctx))
    await _play(seq, instances, table, audit, task, waits)
    if not short and not task.done():  # the person answers at last (or cancels)
        final = rng.choice((*OPS[:2], "cancel"))
        await _play_one(final, seq, instances, table, audit, task, waits)
    await asyncio.wait({task})
    execution = None if task.cancelled() else task.result()
    # late answers, once the call has ended
    for _ in range(rng.randint(0, 2)):
        await _answer(rng.choice(instances), seq, rng.random() < 0.5)
    await waits.close()
    return seq, execution, tool


async def _check(seed: int, seq: Sequence, execution: ToolExecution | None, tool: RecordingTool, table: Table) -> str:
    """One sequence's invariants; how its call ended."""
    accepted = [d for d, got in seq.answers if got["accepted"]]
    refused = [got for _, got in seq.answers if not got["accepted"]]
    assert len(accepted) <= 1, (seed, seq.answers)
    assert all(got["status"] in REFUSALS for got in refused), (seed, refused)
    assert all(d.by == "alice" for d in accepted), (seed, accepted)
    item = await table.get(it.wait_key(seq.run_id, "call"))
    assert item is not None
    wait = it.wait_from_item(item)
    if accepted:
        assert wait.status == WaitStatus.SUBMITTED and wait.approved is accepted[0].approved, seed
    if execution is None:
        assert seq.cancelled and tool.executions == [], seed
        return "cancelled"
    if accepted and accepted[0].approved:
        assert execution.status == ToolStatus.OK and tool.executions == ["call"], (seed, execution)
        return "ran"
    assert tool.executions == [], seed
    if accepted:
        assert (execution.status, execution.reason) == (ToolStatus.DENIED, "approval_denied"), seed
    elif seq.cancelled and execution.reason == "approval_cancelled":
        # The cancel closed the wait just as its time ran out: the run's expiry lost to it, and the run honours
        # the cancel (the call never runs) before the cancel reaches the task itself.
        assert execution.status == ToolStatus.DENIED and wait.status == WaitStatus.CANCELLED, seed
        return "cancelled"
    else:
        assert (execution.status, execution.reason) == (ToolStatus.TIMEOUT, "approval_timeout"), seed
        assert wait.status == WaitStatus.EXPIRED, seed
    return execution.reason


@pytest.mark.parametrize("backend", ["sqlite", "moto"])
async def test_a_call_runs_at_most_once_and_only_after_an_approval(
    backend: str, request: pytest.FixtureRequest
) -> None:
    table: Table = request.getfixturevalue(f"{backend}_table")
    if isinstance(table, DynamoTable):  # moto's backend has no lock; DynamoDB's conditional writes are atomic
        client = SerialClient(table.client)
        table = DynamoTable(table.table_name, lambda: client)
    audit: list[dict[str, Any]] = []
    run_side = _context(table, audit)
    instances = [_context(table, audit), _context(table, audit)]
    executions = double = unapproved = 0
    outcomes: dict[str, int] = {}
    sequences = SEQUENCES[backend]
    for first in range(0, sequences, BATCH):  # a batch's sequences run at once (their waits overlap)
        batch = range(first, min(first + BATCH, sequences))
        played = await asyncio.gather(*(_one(seed, run_side, instances, table, audit) for seed in batch))
        for seed, (seq, execution, tool) in zip(batch, played, strict=True):
            executions += len(tool.executions)
            double += len(tool.executions) > 1
            unapproved += bool(tool.executions) and not any(d.approved for d, got in seq.answers if got["accepted"])
            outcome = await _check(seed, seq, execution, tool, table)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # 0 executions without an approval, 0 double executions
    assert (double, unapproved) == (0, 0)
    # The sequences covered every ending: approved and run, denied, timed out, cancelled
    assert {"ran", "approval_denied", "approval_timeout", "cancelled"} <= set(outcomes), outcomes
    assert executions == outcomes["ran"] and sum(outcomes.values()) == sequences
