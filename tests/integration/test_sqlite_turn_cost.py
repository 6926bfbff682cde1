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
from agent_core.domain.jobs import CompactJob
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.item_size import item_size
from agent_core.store.schema import PK, SK
from agent_core.store.sqlite_db import SqliteDatabase, WouldBlock
from agent_core.store.sqlite_jobs import SqliteJobJournal
from agent_core.store.sqlite_table import SqliteTable
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings

# A plain turn on main before this work: 14 SELECTs (2 of them re-reading an item the same transaction had
# just read, 1 reading an item whose write has no condition), 2 read transactions (BEGIN / COMMIT around the
# batch get and around the one-statement history query), 2 write transactions, every statement in a worker
# thread. Now: 11 SELECTs, 1 read transaction (the batch get: one snapshot for its three lookups, cheaper than
# three statements each taking the WAL read lock), the same 2 write transactions, all on the loop's thread.
# Since long-term memory, the batch get reads a fourth key in that snapshot (the user's records version): 12.
# Since a put that may only create its item is a plain INSERT (the primary key checks `not_exists`), the first
# transaction no longer reads its three new items (REQ, USER message, RUN) first: 9.
MAX_SELECTS_PER_TURN = 9
# The batch get is now one statement (a UNION ALL of its lookups), its own snapshot: no read transaction.
MAX_READ_TRANSACTIONS_PER_TURN = 0
WRITE_TRANSACTIONS_PER_TURN = 2
# Since the usage ledger, each run also queues one ledger write (the UsageJob, after the answer is stored): one
# more write transaction, made by the job the test joins, not on the answer's path.
LEDGER_WRITE_TRANSACTIONS_PER_RUN = 1
LEDGER_SELECTS_PER_RUN = 2  # the day's row and the day's budget (updated); the run's marker is a plain INSERT
# A lock holder lets go by itself after this long: if a write ever waited for a lock on the event loop, the
# loop would be stuck until then and the write done when the test looks (a failure, not a hang).
HOLD_AT_MOST_S = 10


@dataclass
class Trace:
    """Every statement any connection of the database ran, with whether it ran on the test's (loop) thread."""

    loop_thread: int
    statements: list[tuple[bool, str]] = field(default_factory=list)
    connections: list[sqlite3.Connection] = field(default_factory=list)  # of each statement

    def add(self, sql: str, connection: sqlite3.Connection) -> None:
        self.statements.append((threading.get_ident() == self.loop_thread, sql))
        self.connections.append(connection)

    def clear(self) -> None:
        self.statements.clear()
        self.connections.clear()

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
        connection.set_trace_callback(lambda sql: trace.add(sql, connection))
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
    trace.clear()

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
    # And on the writer's connection, reads too: a connection drops its page cache whenever it finds another
    # connection's commit, so a separate reader would read its pages again after every write.
    assert all(connection is db._nowait_writer for connection in trace.connections)


async def test_the_job_journal_writes_on_the_loop_without_a_thread_hop(traced: tuple[SqliteDatabase, Trace]) -> None:
    """The local queue journals every job it is given (a run's usage job on every turn): uncontended, the
    journal's writes and reads run on the loop's thread, as the table's do."""
    db, trace = traced
    journal = SqliteJobJournal(db)
    entry = await journal.add(CompactJob(chat_id="c_1", model="m"))
    assert [job for _, job, _ in await journal.pending()] == [CompactJob(chat_id="c_1", model="m")]
    await journal.done(entry)
    assert await journal.pending() == []
    assert trace.count("INSERT INTO JOBS") == 1 and trace.count("DELETE FROM JOBS") == 1
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


def _wal_frames(path: Path) -> int:
    """How many frames the WAL holds (copied into the database or not): what a checkpoint reports as the log."""
    connection = sqlite3.connect(str(path))
    try:
        return int(connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        connection.close()


async def test_the_wal_starts_over_after_a_checkpoint_that_could_not_copy_every_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite starts the log over only when a writer finds every frame of it copied into the database. A
    PASSIVE checkpoint copies only the frames no reader still needs, and on a busy server it always ends
    behind the commits made while it copied: if that left the log as it was, the WAL would grow without bound
    under steady load (and every frame be an append). Here a reader on an older snapshot holds the copy short
    of the end and finishes right after it; the next write must still start the log over."""
    path = tmp_path / "agent-core.sqlite3"
    db = SqliteDatabase(path)
    table = SqliteTable(db)
    connect = sqlite3.connect
    reader = connect(str(path), isolation_level=None)

    class ReaderFinishesAfterTheCopy:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            cursor = self.connection.execute(sql, *args)
            if sql == "PRAGMA wal_checkpoint(PASSIVE)" and reader.in_transaction:
                reader.execute("COMMIT")
            return cursor

        def __getattr__(self, name: str) -> Any:
            return getattr(self.connection, name)

    try:
        for n in range(10):
            await table.put({PK: "P", SK: f"a{n}"})
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 10
        for n in range(10):
            await table.put({PK: "P", SK: f"b{n}"})
        monkeypatch.setattr(
            sqlite_db_module.sqlite3, "connect", lambda *a, **k: ReaderFinishesAfterTheCopy(connect(*a, **k))
        )
        db.checkpoint()
        monkeypatch.setattr(sqlite_db_module.sqlite3, "connect", connect)
        await table.put({PK: "P", SK: "last"})
        frames = _wal_frames(path)
    finally:
        reader.close()
        db.close()
    assert frames < 5, f"the WAL holds {frames} frames: it did not start over"


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
