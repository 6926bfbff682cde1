"""Exactly once across crashes: random sequences of answers to a real run's approval while the instance that runs it
may die (1,000 on SQLite, on moto 250 or APPROVAL_SEQUENCES), counting the tool's executions.

Each sequence is one real native turn (`TurnRunner` over a prepared turn: a scripted model calls `write_note`,
which always needs approval; the tool records each execution) on a run-holding instance, answered through the
submit route's function (`answer_approval`) by other instances over the same table: approvals, denials,
duplicates, concurrent answers, answers from another user, late answers (after the run ended, or after the
wait's time ran out), a timeout (a short `tool_approval_timeout_ms`), a cancel (the cancel route's flag and
local signal) and restarts of answering instances (a fresh context over the same table).

And the run-holding instance may die at any point of its run: before it asks, while it waits, in the middle of
claiming and running the approved call, while it stores its end. A death is `kill -9`, not an exception
(tests/support/process_death.py): every store call and tool execution of that instance is one step of its
`Life`; from the step it dies at (before it, or after it with its answer lost), nothing of it reaches the store
any more. Its tasks sit frozen, so none of its cleanup runs (no end stored, no waits closed, no lease released):
one event loop holds every instance, yet the dead one has no effect, which is what a dead process is. (Its own
thread and loop, abandoned, would not be: a collected coroutine runs its `finally` blocks.)

After a death the lease runs out (its META's `leaseExpiresAt` set in the past through the store: the clock
passing two heartbeats), answers come to the stopped run (accepted ones queue its continuation), time may pass
for its waits (their `expiresAt` set in the past), and the run is continued as the product does it: the queued
`ContinueRunJob`s, the idle pass (`settle_interrupted_runs` with the waiting runs, which queues or settles) and
extra `continue_run` calls, several at once from fresh instances (exactly one takes the lease); a continuing
instance may itself die (then again, from the checkpoint).

Invariants, per sequence: the tool ran at most once, and only if an approval was accepted; at most one answer
accepted; a denial, a timeout or no answer never runs it; an answer accepted by a stopped run leads to the run
continuing (it ends completed, unless a cancel came); every run ends (completed, cancelled, or failed
`interrupted` when it died before its checkpoint) and its chat's lease is free; at most one `continue_run` of a
round continues it. Over all sequences: the endings and crash points the issue names all occur.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
from collections import Counter
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_core import context as context_module
from agent_core.api.routes.submit import answer_approval
from agent_core.config import Settings
from agent_core.context import AppContext, build_context, build_registry
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.jobs import ContinueRunJob
from agent_core.domain.models import ApprovalDecision, Chat, RunStatus, WaitStatus
from agent_core.jobs.continuation import continue_waiting_run
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.continuation import continue_run
from agent_core.runtime.interrupted import settle_interrupted_runs, waiting_runs
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store import items as it
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.schema import create_table_kwargs
from agent_core.store.table import Condition, Table, Update, eq
from agent_core.tools.base import ToolContext
from tests.support.approvals import RecordingTool
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.process_death import Life, MortalTable, ProcessGone
from tests.support.recorded_queue import RecordedQueue
from tests.support.wait import DEFAULT_BOUND_S, apoll_until

SEQUENCES = {"sqlite": 1000, "moto": int(os.environ.get("APPROVAL_SEQUENCES", "250"))}
BATCH = 50
POLL_S = 0.01  # the holder polls its wait often: answers and deaths interleave with its reads
CALL = "call"
LONG_MS = 60_000  # a wait that only an answer, a cancel or a death ends
REFUSALS = {"already_decided", "expired", "cancelling", "run_ended", "unmatched", "interrupted"}
ENDED = {s.value for s in RunStatus if s != RunStatus.RUNNING}
LIVE_OPS = ("approve", "deny", "duplicate", "concurrent", "pause", "cancel", "restart", "other_user", "crash")
STOPPED_OPS = ("approve", "deny", "duplicate", "concurrent", "cancel", "restart", "time_passes")


class MortalTool(RecordingTool):
    """`write_note` of one instance: an execution is a step of the instance's life, recorded (by run) in `ran`,
    which every instance shares: what exactly-once counts."""

    def __init__(self, life: Life, ran: list[tuple[str, Life]]) -> None:
        super().__init__()
        self.life, self.ran = life, ran

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        async def execute() -> Any:
            self.ran.append((ctx.run_id or "", self.life))
            return await super(MortalTool, self).run(args, ctx)

        return await self.life.step(execute, "tool")

    def schema(self) -> dict[str, Any]:
        return _SCHEMA


_SCHEMA = RecordingTool().schema()  # built once (each instance registers its own tool)


@dataclass
class World:
    """What every instance shares: the table, the executions, the queue (and its settings and built-in tools,
    built once: every instance's context is otherwise built as the app builds it)."""

    table: Table
    settings: Settings
    ran: list[tuple[str, Life]] = field(default_factory=list)  # (run, the instance it ran on) per execution
    audit: list[dict[str, Any]] = field(default_factory=list)
    graves: set[asyncio.Task[Any]] = field(default_factory=set)  # dead instances' tasks, ending with ProcessGone
    lives: list[Life] = field(default_factory=list)
    queue: RecordedQueue = field(default_factory=RecordedQueue)

    async def bury_all(self) -> None:
        """Every dead instance's tasks have ended (ProcessGone), within the bound."""
        for life in self.lives:
            if life.dead.is_set():
                life.bury()
        while graves := {t for t in self.graves.union(*(life.tasks for life in self.lives)) if not t.done()}:
            done, _ = await asyncio.wait(graves, timeout=DEFAULT_BOUND_S)
            assert done, f"a dead instance's tasks never ended: {graves}"

    def instance(self, *, life: Life | None = None, timeout_ms: int = LONG_MS, calls: bool = False) -> AppContext:
        """A fresh app instance over the shared table (its own life, LLM, tool, cancels); `calls`: its model
        calls `write_note` first (the run-holding instance), else it answers `ok`."""
        life = life or Life()
        self.lives.append(life)
        settings = self.settings.model_copy(update={"tool_approval_timeout_ms": timeout_ms})
        llm = ScriptedLlm(Reply(tool_calls=[(CALL, "write_note", {"path": "p"})])) if calls else ScriptedLlm()
        table = MortalTable(self.table, life)
        context = build_context(settings, table=table, llm=llm, blobs=MemoryBlobStore(), audit=self.audit.append)
        context.deps.tools.registry.register(MortalTool(life, self.ran))
        agent = AgentDefinition(key="writer", name="Writer", tools=[{"name": "write_note", "approval": "always"}])
        context.deps.agents = AgentCatalog([agent])
        context.deps.work_queue = context.deps.in_process = self.queue
        return context


def _life(context: AppContext) -> Life:
    table = context.deps.checkpoints.table if context.deps.checkpoints is not None else None
    assert isinstance(table, MortalTable)
    return table.life


@dataclass
class Answer:
    decision: ApprovalDecision
    got: dict[str, Any]
    stopped: bool  # given after the run's lease ran out (its holder dead)


@dataclass
class Sequence:
    seed: int
    rng: random.Random
    world: World
    answerers: list[AppContext]
    user: str
    chat_id: str = ""
    run_id: str = ""
    answers: list[Answer] = field(default_factory=list)
    last: ApprovalDecision | None = None
    cancelled: bool = False  # a cancel was flagged on the running run
    stopped: bool = False  # the holder died and its lease ran out
    asked: bool = False  # the run sent tool.approval
    crashes: list[str] = field(default_factory=list)  # when each death fell: before_asking, waiting, ...
    rounds: list[list[str]] = field(default_factory=list)  # what each continuation round's calls said
    lives: list[Life] = field(default_factory=list)  # of the instances that ran the run: its holder first
    died_at: list[str] = field(default_factory=list)  # the steps they died at
    events: list[dict[str, Any]] = field(default_factory=list)
    time_passed: bool = False

    async def answer(self, approved: bool, user: str | None = None) -> None:
        user = user or self.user
        decision = ApprovalDecision(approved=approved, by=user, at_ms=now_ms(), reason=f"r{self.rng.randint(0, 9)}")
        self.last = decision
        got = await answer_approval(self.rng.choice(self.answerers).deps, self.run_id, CALL, decision)
        self.answers.append(Answer(decision, got, self.stopped))
        if got["accepted"] and self.stopped:  # accepted by a stopped run: its continuation is queued
            assert self.world.queue.queued(self.run_id), (self.seed, "an accepted answer queued no continuation")

    async def cancel(self, holder: AppContext | None) -> None:
        """The cancel route: the RUN item's flag (its waits closed) from some instance, and the signal of the
        holder's own (as when the route reaches the instance that runs it; a dead one takes no request)."""
        if await self.rng.choice(self.answerers).deps.turns.request_cancel(self.chat_id, self.run_id):
            self.cancelled = True
        if holder is not None and not _life(holder).dead.is_set() and self.rng.random() < 0.5:
            holder.deps.cancels.signal(self.run_id)

    async def play(self, op: str, holder: AppContext | None) -> None:
        rng = self.rng
        if op in ("approve", "deny"):
            await self.answer(op == "approve")
        elif op == "other_user":
            await self.answer(True, user="mallory")
        elif op == "duplicate" and self.last is not None:
            await self.answer(self.last.approved, self.last.by)
        elif op == "concurrent":
            await asyncio.gather(*(self.answer(rng.random() < 0.5) for _ in range(rng.randint(2, 3))))
        elif op == "cancel" and not self.cancelled:
            await self.cancel(holder)
        elif op == "restart":
            self.answerers[rng.randrange(len(self.answerers))] = self.world.instance()
        elif op == "time_passes":
            await self.pass_time()

    async def pass_time(self) -> None:
        """The wall clock passes the wait's expiry (while nobody runs the run: its holder is dead)."""
        self.time_passed = True
        with contextlib.suppress(Exception):
            await self.world.table.update(
                it.wait_key(self.run_id, CALL),
                Update(set={"expiresAt": now_ms() // 1000 - 1}),
                Condition.of(eq("status", WaitStatus.WAITING.value)),
            )


async def _start(seq: Sequence, holder: AppContext) -> tuple[asyncio.Task[None], asyncio.Event]:
    """The run on its holder: a turn prepared (its chat's lease taken), then its events read as a client does."""
    deps = holder.deps
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id=seq.user, agent_key="writer", created_at=at, last_activity_at=at)
    await deps.chats.create_chat(chat)
    prepared = await prepare_turn(deps, TurnRequest(user_id=seq.user, chat_id=chat.chat_id, message="write"))
    assert isinstance(prepared, PreparedTurn)
    seq.chat_id, seq.run_id = chat.chat_id, prepared.run.run_id
    runner = TurnRunner(prepared)
    runner.run.bridge.first_poll_s = runner.run.bridge.poll_s = POLL_S
    asked = asyncio.Event()

    async def client() -> None:
        async for envelope in runner.events():
            event = envelope.wire()
            seq.events.append(event)
            if event["type"] == "tool.approval":
                seq.asked = True
                asked.set()

    return asyncio.create_task(client()), asked


async def _first(tasks: set[asyncio.Task[Any]], *events: asyncio.Event) -> None:
    """Until one of the tasks ends or one of the events is set (within the bound: not a timing assertion)."""
    waits = {asyncio.ensure_future(event.wait()) for event in events}
    try:
        done, _ = await asyncio.wait(tasks | waits, timeout=DEFAULT_BOUND_S, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    assert done, "nothing happened within the bound"


async def _stop(seq: Sequence, life: Life) -> None:
    """The run's holder is dead: its lease runs out (two missed heartbeats)."""
    answered = any(a.got["accepted"] for a in seq.answers)
    seq.crashes.append("after_answer" if answered else "waiting" if seq.asked else "before_asking")
    seq.died_at.append(life.died_at)
    await _lease_runs_out(seq)
    seq.stopped = True


async def _lease_runs_out(seq: Sequence) -> None:
    """The META's lease expiry set in the past, through the store: conditional on the run holding it (a run that
    ended released it)."""
    await seq.answerers[0].deps.turns.expire_lease(seq.chat_id, seq.run_id)


async def _continue(seq: Sequence, mortal: bool) -> None:
    """One round: the queued continuations, maybe the idle pass (which queues one, or settles a run without a
    checkpoint), maybe more `continue_run` calls, all at once, each from a fresh instance; a `mortal` round has
    one of them die at some step (then the lease runs out again)."""
    rng, world = seq.rng, seq.world
    jobs = world.queue.continuations(seq.run_id)
    if not jobs or not mortal or rng.random() < 0.5:  # the idle pass runs in time, whatever else happens
        pass_at = now_ms()
        idle = world.instance()
        await settle_interrupted_runs(
            idle.deps.turns, pass_at, expired_before=pass_at, user_id=seq.user, waiting=waiting_runs(idle.deps)
        )
        jobs += world.queue.continuations(seq.run_id)
    extra = rng.randint(0 if jobs else 1, 2)
    jobs += [ContinueRunJob(chat_id=seq.chat_id, run_id=seq.run_id, user_id=seq.user)] * extra
    instances = [world.instance() for _ in jobs]
    lives = [_life(instance) for instance in instances]
    seq.lives.extend(lives)
    dying = rng.choice(lives) if mortal and rng.random() < 0.4 else None
    if dying is not None:
        dying.arm(rng.randint(1, 40), after=rng.random() < 0.5)

    async def one(instance: AppContext, job: ContinueRunJob) -> str:
        if rng.random() < 0.5:  # as the worker runs the queued job
            return "continued" if await continue_waiting_run(instance.deps, job) else "not"
        return await continue_run(instance.deps, job.chat_id, job.run_id, job.user_id)

    tasks = [asyncio.ensure_future(one(i, j)) for i, j in zip(instances, jobs, strict=True)]
    alive = {t for t, life in zip(tasks, lives, strict=True) if life is not dying}
    if alive:
        await asyncio.wait(alive)
    if dying is not None:
        await _first(set(tasks) - alive, dying.dead)
        if dying.dead.is_set():
            seq.crashes.append("continuing")
            seq.died_at.append(dying.died_at)
            await _lease_runs_out(seq)
    for life in lives:
        life.bury()
    world.graves.update(t for t, life in zip(tasks, lives, strict=True) if life.dead.is_set())
    # what each call said (a living instance's failure fails the test here)
    seq.rounds.append(["dead" if life.dead.is_set() else t.result() for t, life in zip(tasks, lives, strict=True)])


async def _waits_or_over(seq: Sequence, driver: asyncio.Task[None], life: Life) -> bool:
    if driver.done() or life.dead.is_set():
        return True
    return await seq.world.table.get(it.checkpoint_key(seq.run_id)) is not None


async def _all(sequences: Iterable[Coroutine[Any, Any, Sequence]]) -> list[Sequence]:
    """The sequences played at once; when one fails the others are stopped (a failure fails the test at once)."""
    tasks = [asyncio.ensure_future(sequence) for sequence in sequences]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=DEFAULT_BOUND_S)  # bounded: a failure never hangs the suite


def _not_the_dead(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A dead instance's tasks end with ProcessGone once buried; what any other task leaves is reported."""
    if not isinstance(context.get("exception"), ProcessGone):
        loop.default_exception_handler(context)


async def _status(seq: Sequence) -> RunStatus:
    run = await seq.answerers[0].deps.turns.get_run(seq.chat_id, seq.run_id)
    assert run is not None
    return run.status


async def _one(seed: int, world: World) -> Sequence:
    rng = random.Random(seed)
    short = rng.random() < 0.3
    timeout_ms = rng.randint(20, 200) if short else LONG_MS
    seq = Sequence(seed, rng, world, [world.instance(), world.instance()], user=f"u{seed}")
    holder = world.instance(timeout_ms=timeout_ms, calls=True)
    life = _life(holder)
    seq.lives.append(life)
    driver, asked = await _start(seq, holder)
    if rng.random() < 0.2:  # it dies at some step of its run: before it asks, or soon after
        life.arm(rng.randint(1, 8), after=rng.random() < 0.5)
    await _first({driver}, life.dead, asked)
    # While the run runs (or its holder lies dead, its lease not yet run out)
    for _ in range(rng.randint(1, 5)):
        op = rng.choice(LIVE_OPS)
        if op == "crash" and not life.dead.is_set():
            when = rng.choice(("now", "waiting", "soon", "claim", "end"))
            if when == "waiting":  # once it waits in place: its checkpoint stored
                await apoll_until(lambda: _waits_or_over(seq, driver, life), "the run waits, ends or dies")
            if when == "soon":  # at one of its next steps, whichever
                life.arm(rng.randint(1, 30), after=rng.random() < 0.5)
            elif when in ("claim", "end"):  # taking the approved call (or just after), or storing its end
                life.arm_on("update WAIT claimedAt" if when == "claim" else "transact", after=rng.random() < 0.5)
            else:
                life.kill()
        elif op == "pause":  # lets the run poll, decide, time out or die between answers
            await asyncio.wait({driver}, timeout=rng.uniform(0, 0.02))
        else:
            await seq.play(op, holder)
    if not life.dead.is_set() and not driver.done():
        # A wait that only an answer ends gets one (or a cancel): its run must end by itself
        if not short:
            final = rng.choice(("approve", "deny", "cancel"))
            await (seq.cancel(holder) if final == "cancel" else seq.answer(final == "approve"))
        await _first({driver}, life.dead)
    if life.dead.is_set():
        await _stop(seq, life)
        for _ in range(rng.randint(0, 3)):  # the answers (and cancels) that come to the stopped run
            await seq.play(rng.choice(STOPPED_OPS), None)
        for mortal in (True, True, False):  # at most two more deaths: the last round's instances all live
            if await _status(seq) != RunStatus.RUNNING:
                break
            wait = await world.table.get(it.wait_key(seq.run_id, CALL))
            if wait is not None and wait.get("status") == WaitStatus.WAITING.value:
                # A run waiting still is continued by nobody: it gets its answer, or its time runs out
                await (seq.answer(rng.random() < 0.5) if rng.random() < 0.5 else seq.pass_time())
            await _continue(seq, mortal)
    for _ in range(rng.randint(0, 2)):  # late answers, once the run ended
        await seq.answer(rng.random() < 0.5)
    life.bury()
    if life.dead.is_set():
        world.graves.add(driver)  # its client's reader ends with ProcessGone, in its own time
    else:
        driver.result()
    return seq


async def _check(seq: Sequence, world: World) -> list[str]:
    """One sequence's invariants; what it covered (how its run ended, where deaths fell)."""
    seed = seq.seed
    accepted = [a for a in seq.answers if a.got["accepted"]]
    refused = [a.got["status"] for a in seq.answers if not a.got["accepted"]]
    ran = [life for run_id, life in world.ran if run_id == seq.run_id]
    claimed = [life for life in seq.lives if "update WAIT claimedAt" in life.done]
    assert len(accepted) <= 1, (seed, seq.answers)
    assert set(refused) <= REFUSALS | ENDED, (seed, refused)
    assert all(a.decision.by == seq.user for a in accepted), (seed, accepted)
    approved = bool(accepted) and accepted[0].decision.approved
    # The tool ran at most once, only after an accepted approval, on the instance that claimed the call
    assert len(ran) <= 1, (seed, len(ran))
    assert not ran or approved, (seed, seq.answers)
    assert len(claimed) <= 1 and ran == claimed[: len(ran)], (seed, seq.died_at)
    # ... and a claimed call that did not run was claimed by an instance that died
    assert not claimed or ran or claimed[0].dead.is_set(), (seed, seq.died_at)
    run = await seq.answerers[0].deps.turns.get_run(seq.chat_id, seq.run_id)
    assert run is not None
    # Every run ends, and its chat's lease is free
    assert run.status != RunStatus.RUNNING, (seed, seq.crashes, seq.rounds)
    meta = await world.table.get(it.meta_key(seq.chat_id))
    assert meta is not None and "activeRunId" not in meta, (seed, meta)
    if run.status == RunStatus.FAILED:
        assert run.error_code == "interrupted" and seq.crashes, (seed, run.error_code)
    # An answer accepted by a stopped run went on: the run continued (and completed, unless cancelled)
    if any(a.stopped for a in accepted) and not seq.cancelled:
        assert run.status == RunStatus.COMPLETED, (seed, run.status, seq.rounds)
    # An approval accepted by a run that lived ran the call
    if approved and not seq.crashes and not seq.cancelled:
        assert len(ran) == 1 and run.status == RunStatus.COMPLETED, (seed, run.status)
    # At most one call of a round continued the run
    assert all(r.count("continued") <= 1 for r in seq.rounds), (seed, seq.rounds)
    covered = [*seq.crashes, f"status:{run.status.value}"]
    if ran:
        covered.append("ran" if ran[0] is seq.lives[0] else "ran_continued")
        covered += ["ran_then_died"] if ran[0].dead.is_set() else []
    elif claimed:
        covered.append("claimed_by_the_dead")
    elif approved:
        covered.append("approved_not_run")
    elif accepted:
        covered.append("denied")
    if any(a.stopped for a in accepted):
        covered.append("accepted_stopped")
    if any(a.got["status"] == "interrupted" for a in seq.answers):
        covered.append("refused_interrupted")
    if any(r.count("continued") == 1 and len(r) > 1 for r in seq.rounds):
        covered.append("raced_continuations")
    if seq.time_passed and not accepted:
        covered.append("timed_out_stopped")
    return covered


@pytest.mark.parametrize("backend", ["sqlite", "moto"])
async def test_an_approved_call_runs_at_most_once_whichever_instance_dies(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(AGENT_STORAGE="aws")
    builtins = build_registry(settings)  # built once: each instance's context is otherwise built as the app's
    monkeypatch.setattr(context_module, "build_registry", lambda settings: builtins.extended([]))
    asyncio.get_running_loop().set_exception_handler(_not_the_dead)
    tables = _tables(backend, request)
    sequences = SEQUENCES[backend]
    covered: Counter[str] = Counter()
    worlds: dict[int, World] = {}
    try:
        for first in range(0, sequences, BATCH):  # a batch's sequences run at once (their waits overlap)
            batch = {seed: World(next(tables), settings) for seed in range(first, min(first + BATCH, sequences))}
            worlds.update(batch)
            for seq in await _all(_one(seed, world) for seed, world in batch.items()):
                covered.update(await _check(seq, worlds[seq.seed]))
        for world in worlds.values():  # every dead instance's tasks end (they overlapped the later batches)
            await world.bury_all()
    finally:  # also when a check failed: every instance ends, so nothing is left running (the loop can close)
        left: set[asyncio.Task[Any]] = set()
        for world in worlds.values():
            for life in world.lives:
                life.kill()
                life.bury()
            left |= {t for t in world.graves.union(*(life.tasks for life in world.lives)) if not t.done()}
        if left:
            await asyncio.wait(left, timeout=DEFAULT_BOUND_S)
    print(backend, dict(covered))
    # 0 executions without an approval, 0 double executions: checked per sequence above. The sequences covered
    # every ending, deaths at every stage (before it asked, while it waited, after the answer, while it was
    # being continued), an approved call taken by an instance that died before it ran it, answers to stopped
    # runs, and continuations racing each other.
    must = {"status:completed", "status:cancelled", "status:failed", "ran", "denied", "raced_continuations"}
    must |= {"waiting", "after_answer", "ran_then_died", "claimed_by_the_dead"}
    if backend == "sqlite":  # the rarer ones, among its thousand
        must |= {"before_asking", "continuing", "ran_continued", "accepted_stopped", "refused_interrupted"}
        must |= {"timed_out_stopped"}
    assert must <= set(covered), must - set(covered)


def _tables(backend: str, request: pytest.FixtureRequest) -> Iterator[Table]:
    """SQLite: one table for all. moto: a table of its own for each sequence (moto's transaction copies its whole
    table, for each of its items: a turn's cost would grow with every sequence before it), dropped after its
    batch."""
    if backend == "sqlite":
        table: Table = request.getfixturevalue("sqlite_table")
        while True:
            yield table
    request.getfixturevalue("aws_env")
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    names: list[str] = []
    for n in itertools.count():
        names.append(f"crash-property-{n}")
        client.create_table(**create_table_kwargs(names[-1]))
        if len(names) > 2 * BATCH:  # the batch before the last one is over
            client.delete_table(TableName=names.pop(0))
        yield DynamoTable(names[-1], lambda: client)
