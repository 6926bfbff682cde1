"""What a turn costs on the embedded SQLite store, counted (never timed): statements, transactions, commits and
the threads they run on; and the non-waiting path's fallbacks (a held lock, a busy file) and checkpoints."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import struct
import threading
from collections import Counter
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
from agent_core.store.table import Condition, Update, UpdateOp
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


# ---------------------------------------------------------------- pages a commit writes


def _wal_pages(path: Path) -> list[int]:
    """The page number of every frame the WAL holds, in order. With the checkpoint thread held off
    (`CHECKPOINT_EVERY` out of reach) the log never starts over, so the frames a commit appends are the
    pages it wrote."""
    data = path.with_name(path.name + "-wal").read_bytes()
    if len(data) < 32:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    frame = 24 + page_size
    return [struct.unpack(">I", data[at : at + 4])[0] for at in range(32, len(data) - frame + 1, frame)]


def _written_by(db: SqliteDatabase, pages: list[int]) -> Counter[str]:
    """How many of `pages` each b-tree (the table, each index) holds, as `dbstat` maps pages to b-trees;
    "header" for page 1 when only the database header changed."""
    owners = {page: name for name, page in db._writer.execute("SELECT name, pageno FROM dbstat")}
    return Counter(owners.get(page, "header" if page == 1 else "free") for page in pages)


@pytest.fixture
def no_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_db_module, "CHECKPOINT_EVERY", 10**9)


@pytest.mark.usefixtures("no_checkpoints")
async def test_an_update_writes_only_the_index_pages_whose_keys_change(tmp_path: Path) -> None:
    """An item in every index (as a chat's META is while a run holds its lease) updated in a plain attribute
    rewrites its row and no index page; a changed GSI key rewrites that index alone, alone or in a
    transaction. (INSERT OR REPLACE deletes the row and inserts it again in every index holding it: one WAL
    page per index per commit.)"""
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    table = SqliteTable(db)
    key = {PK: "CHAT#c", SK: "META"}
    indexed = {f"{name}{part}": f"{name.upper()}#{part}" for name in ("gsi1", "gsi2", "gsi3") for part in ("pk", "sk")}
    try:
        await table.put({**key, **indexed, "expiresAt": 2_000_000_000, "n": 0})
        for n in range(1, 40):  # other items around it: more than one page in each b-tree
            await table.put({PK: f"CHAT#{n:02}", SK: "META", **{k: f"{v}{n:02}" for k, v in indexed.items()}})

        before = len(_wal_pages(db.path))
        await table.update(key, Update(set={"n": 1}, add={"count": 1}))
        plain = _written_by(db, _wal_pages(db.path)[before:])

        before = len(_wal_pages(db.path))
        await table.update(key, Update(set={"gsi3sk": "GSI3#later"}))
        one_key = _written_by(db, _wal_pages(db.path)[before:])

        before = len(_wal_pages(db.path))
        await table.transact([UpdateOp(key, Update(set={"n": 2}, remove=("gsi2pk", "gsi2sk")), Condition.of())])
        removed = _written_by(db, _wal_pages(db.path)[before:])

        assert set(plain) == {"items"}, plain
        assert set(one_key) == {"items", "items_gsi3"}, one_key
        assert set(removed) == {"items", "items_gsi2"}, removed
        # and the indexes say what the items say
        assert [i[SK] for i in (await table.query(indexed["gsi3pk"], index="gsi3")).items] == ["META"]
        assert (await table.query(indexed["gsi3pk"], index="gsi3")).items[0]["gsi3sk"] == "GSI3#later"
        assert (await table.query(indexed["gsi2pk"], index="gsi2")).items == []
        kept = {k: v for k, v in indexed.items() if not k.startswith("gsi2")}
        expected = {**key, **kept, "gsi3sk": "GSI3#later", "expiresAt": 2_000_000_000, "n": 2, "count": 1}
        assert await table.get(key) == expected
    finally:
        db.close()


@pytest.mark.usefixtures("no_checkpoints")
async def test_an_item_with_a_ttl_costs_no_index_page_and_an_old_databases_ttl_index_goes(tmp_path: Path) -> None:
    """Every turn writes items with a TTL (the run's pointer, the usage rows); only the sweep at open reads the
    TTL column, so it has no index, whose page every such commit would write. A database made with one (by an
    earlier version) loses it when opened, and the sweep still deletes what has expired."""
    path = tmp_path / "agent-core.sqlite3"
    old = sqlite3.connect(str(path))
    old.execute(
        "CREATE TABLE items (pk TEXT NOT NULL, sk TEXT NOT NULL, data TEXT NOT NULL, gsi1pk TEXT, gsi1sk TEXT,"
        " gsi2pk TEXT, gsi2sk TEXT, gsi3pk TEXT, gsi3sk TEXT, ttl INTEGER, PRIMARY KEY (pk, sk)) WITHOUT ROWID"
    )
    old.execute("CREATE INDEX items_ttl ON items (ttl) WHERE ttl IS NOT NULL")
    old.execute('INSERT INTO items (pk, sk, data, ttl) VALUES (\'P\', \'gone\', \'{"pk":"P","sk":"gone"}\', 5)')
    old.commit()
    old.close()
    db = SqliteDatabase(path)
    table = SqliteTable(db)
    try:
        names = {name for (name,) in db._writer.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "items_ttl" not in names
        assert table.sweep_expired(now_s=10) == 1
        before = len(_wal_pages(path))
        await table.put({PK: "RUN#r", SK: "META", "chatId": "c", "expiresAt": 2_000_000_000})
        assert set(_written_by(db, _wal_pages(path)[before:])) == {"items"}
        assert table.sweep_expired(now_s=2_000_000_001) == 1
        assert await table.get({PK: "RUN#r", SK: "META"}) is None
    finally:
        db.close()


# Pages a plain turn's commits write to the WAL (the turn's two and its usage-ledger job's), on a database of a
# few chats, on average: 21.9 with INSERT OR REPLACE for every write and an index on the TTL column; 16.7 once an
# update rewrites only the index pages whose keys change and the TTL column has no index. The rest is the items themselves:
# the lease (META), the request marker, the USER message, the RUN record and its pointer before the model call,
# each on a leaf page of its own; the answer, the RUN record (over one page's inline limit: an overflow page)
# and the META after; the usage rows.
# The bound leaves room for about one more item in a turn's transactions; the two tests above pin each cause.
MAX_WAL_PAGES_PER_TURN = 20


@pytest.mark.usefixtures("no_checkpoints")
async def test_a_plain_turn_writes_few_pages(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "agent-core.sqlite3")
    try:
        ctx = build_context(make_settings(), table=SqliteTable(db), llm=ScriptedLlm(), audit=lambda _: None)
        written: list[int] = []
        for chat in range(6):
            chat_id = (await run_blocking(ctx.deps, TurnRequest(user_id="u", message=f"chat {chat}"))).chat_id
            for turn in range(8):
                before = len(_wal_pages(db.path))
                await run_blocking(ctx.deps, TurnRequest(user_id="u", message=f"turn {turn}", chat_id=chat_id))
                await ctx.background.join()
                if chat >= 2:
                    written.append(len(_wal_pages(db.path)) - before)
        per_turn = sum(written) / len(written)
        print(f"WAL pages per plain turn: {per_turn:.1f}")
        assert per_turn <= MAX_WAL_PAGES_PER_TURN
    finally:
        db.close()
