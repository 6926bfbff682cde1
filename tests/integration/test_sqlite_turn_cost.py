"""What a turn costs on the embedded SQLite store, counted (never timed): statements, transactions, commits and
the threads they run on; and the non-waiting path's fallbacks (a held lock, a busy file) and checkpoints."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import agent_core.store.sqlite_db as sqlite_db_module
from agent_core.context import build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.item_size import item_size
from agent_core.store.schema import PK, SK
from agent_core.store.sqlite_db import SqliteDatabase, WouldBlock
from agent_core.store.sqlite_table import SqliteTable
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings

# A plain turn on main before this work: 14 SELECTs (2 of them re-reading an item the same transaction had
# just read, 1 reading an item whose write has no condition), 2 read transactions (BEGIN / COMMIT around the
# batch get and around the one-statement history query), 2 write transactions, every statement in a worker
# thread. Now: 11 SELECTs, 1 read transaction (the batch get: one snapshot for its three lookups, cheaper than
# three statements each taking the WAL read lock), the same 2 write transactions, all on the loop's thread.
# Since long-term memory, the batch get reads a fourth key in that snapshot (the user's records version): 12.
MAX_SELECTS_PER_TURN = 12
MAX_READ_TRANSACTIONS_PER_TURN = 1
WRITE_TRANSACTIONS_PER_TURN = 2
# Since the usage ledger, each run also queues one ledger write (the UsageJob, after the answer is stored): one
# more write transaction, made by the job the test joins, not on the answer's path.
LEDGER_WRITE_TRANSACTIONS_PER_RUN = 1
LEDGER_SELECTS_PER_RUN = 3  # its transaction's three items: the run's marker, the day's row, the day's budget
# A lock holder lets go by itself after this long: if a write ever waited for a lock on the event loop, the
# loop would be stuck until then and the write done when the test looks (a failure, not a hang).
HOLD_AT_MOST_S = 10


@dataclass
class Trace:
    """Every statement any connection of the database ran, with whether it ran on the test's (loop) thread."""

    loop_thread: int
    statements: list[tuple[bool, str]] = field(default_factory=list)

    def add(self, sql: str) -> None:
        self.statements.append((threading.get_ident() == self.loop_thread, sql))

    def count(self, prefix: str) -> int:
        return sum(1 for _, sql in self.statements if sql.split("\n")[0].strip().upper().startswith(prefix))

    def off_loop(self) -> list[str]:
        return [sql for on_loop, sql in self.statements if not on_loop]


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SqliteDatabase, Trace]]:
    trace = Trace(threading.get_ident())
    connect = SqliteDatabase._connect

    def traced_connect(self: SqliteDatabase, timeout: float = sqlite_db_module.BUSY_TIMEOUT_S) -> sqlite3.Connection:
        connection = connect(self, timeout)
        connection.set_trace_callback(trace.add)
        return connection

    monkeypatch.setattr(SqliteDatabase, "_connect", traced_connect)
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    yield db, trace
    db.close()


async def test_a_plain_turn_makes_two_write_transactions_few_reads_and_no_thread_hop(
    traced: tuple[SqliteDatabase, Trace],
) -> None:
    db, trace = traced
    ctx = build_context(make_settings(), table=SqliteTable(db), llm=ScriptedLlm(), audit=lambda _: None)
    first = await run_blocking(ctx.deps, TurnRequest(user_id="u", message="hello"))
    await run_blocking(ctx.deps, TurnRequest(user_id="u", message="and again", chat_id=first.chat_id))
    await ctx.background.join()
    trace.statements.clear()

    result = await run_blocking(ctx.deps, TurnRequest(user_id="u", message="a plain turn", chat_id=first.chat_id))
    await ctx.background.join()

    assert result.assistant_message == "ok"
    # The USER message is committed before the model call and the answer before the run completes: two write
    # transactions (and the run's usage ledger write, a job); a one-statement read (the history query) needs no
    # transaction of its own.
    writes = trace.count("BEGIN IMMEDIATE")
    reads = trace.count("BEGIN") - writes
    assert writes == WRITE_TRANSACTIONS_PER_TURN + LEDGER_WRITE_TRANSACTIONS_PER_RUN
    assert reads <= MAX_READ_TRANSACTIONS_PER_TURN
    assert trace.count("COMMIT") == writes + reads
    assert trace.count("SELECT") <= MAX_SELECTS_PER_TURN + LEDGER_SELECTS_PER_RUN
    # Uncontended, every statement ran on the event loop's thread: no hop to a worker and back.
    assert trace.off_loop() == []


def _gives_up_on_the_loop(db: SqliteDatabase) -> asyncio.Event:
    """Set when an operation's attempt on the loop's thread gives up (WouldBlock) to wait in a worker."""
    gave_up = asyncio.Event()
    attempt = db.attempt

    def watched(fn: Any, *args: Any) -> Any:
        try:
            return attempt(fn, *args)
        except WouldBlock:
            gave_up.set()
            raise

    db.attempt = watched  # type: ignore[method-assign]
    return gave_up


async def test_a_write_waits_in_a_worker_while_another_thread_holds_the_write_lock(
    traced: tuple[SqliteDatabase, Trace],
) -> None:
    db, trace = traced
    table = SqliteTable(db)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.write():
            holding.set()
            release.wait(HOLD_AT_MOST_S)

    holder = threading.Thread(target=hold)
    holder.start()
    await asyncio.to_thread(holding.wait)
    gave_up = _gives_up_on_the_loop(db)
    put = asyncio.create_task(table.put({PK: "P", SK: "a", "v": 1}))
    # The put gave up on the loop without waiting (the loop runs on: this test keeps running) and waits for the
    # lock in a worker: it cannot finish while the lock is held.
    await asyncio.wait_for(gave_up.wait(), HOLD_AT_MOST_S / 2)
    assert not put.done()
    assert await table.get({PK: "P", SK: "a"}) is None  # reads go on meanwhile
    release.set()
    await put
    await asyncio.to_thread(holder.join)
    assert await table.get({PK: "P", SK: "a"}) == {PK: "P", SK: "a", "v": 1}
    assert any(sql.startswith("INSERT OR REPLACE INTO items") for sql in trace.off_loop())


async def test_a_write_waits_in_a_worker_while_another_process_holds_the_file(tmp_path: Path) -> None:
    """Another connection (as another process would) holds SQLite's write lock: the non-waiting attempt
    gives up at once (busy), nothing of it written, and the write waits for the lock in a worker thread."""
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    table = SqliteTable(db)
    holding, release = threading.Event(), threading.Event()

    def other_process() -> None:
        other = sqlite3.connect(str(db.path), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("INSERT INTO jobs (body, due_at) VALUES ('{}', 0)")
            holding.set()
            release.wait(HOLD_AT_MOST_S)
            other.execute("COMMIT")
        finally:
            other.close()

    holder = threading.Thread(target=other_process)
    holder.start()
    try:
        await asyncio.to_thread(holding.wait)
        gave_up = _gives_up_on_the_loop(db)
        put = asyncio.create_task(table.put({PK: "P", SK: "b", "v": 2}))
        await asyncio.wait_for(gave_up.wait(), HOLD_AT_MOST_S / 2)
        assert not put.done()
        release.set()
        await put
        assert await table.get({PK: "P", SK: "b"}) == {PK: "P", SK: "b", "v": 2}
    finally:
        release.set()
        await asyncio.to_thread(holder.join)
        db.close()


async def test_commits_on_the_loop_are_checkpointed_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The non-waiting writer never checkpoints inside a commit; every CHECKPOINT_EVERY commits a thread
    copies the WAL into the database file, so the file alone (without its WAL) holds the items."""
    monkeypatch.setattr(sqlite_db_module, "CHECKPOINT_EVERY", 5)
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    table = SqliteTable(db)
    try:
        for n in range(5):
            await table.put({PK: "P", SK: f"k{n}"})
        for thread in threading.enumerate():
            if thread.name == "sqlite-checkpoint":
                await asyncio.to_thread(thread.join)
        with db._checkpointing:  # a checkpoint under way has finished
            shutil.copy(db.path, tmp_path / "copy.sqlite3")
    finally:
        db.close()
    copy = sqlite3.connect(str(tmp_path / "copy.sqlite3"))
    try:
        assert [r[0] for r in copy.execute("SELECT sk FROM items WHERE pk = 'P' ORDER BY sk")] == [
            f"k{n}" for n in range(5)
        ]
    finally:
        copy.close()


@pytest.mark.parametrize(
    "item",
    [
        {PK: "p", SK: "s", "l": [[[[]]]]},
        {PK: "p", SK: "s", "n": [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]},
        {PK: "p", SK: "s", "f": [1e-05, 0.1, -2.5e300, 7.0]},
        {PK: "p", SK: "s", "b": [True, False, None], "m": {"": {}, "x": []}},
        {PK: "p", SK: "s", "t": '你好\U0010ffff\x00"\\', "k": {"ключ": "値"}},
        {"": 0, "a": {"": [{}]}},
    ],
)
def test_an_items_size_is_at_most_twice_its_compact_json_plus_one(item: dict[str, object]) -> None:
    """The bound that lets a small item skip the exact size count (`sqlite_table._checked_size`)."""
    data = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    assert item_size(item) <= 2 * len(data.encode("utf-8")) + 1
    assert len(data.encode("utf-8")) <= 4 * len(data)
