"""One SQLite database file for the embedded local store: connections, the schema, and transactions.

WAL mode, so readers never wait for the writer: each thread reads on its own connection (on the event loop,
the writer's own when no write is under way: its page cache is the one still warm), and every write runs on
one writer connection under a lock, inside `BEGIN IMMEDIATE` (which also takes SQLite's own write
lock, so a second process on the same file, e.g. `agent-core jobs` beside `agent-core serve`, waits its
turn instead of failing).

`run` is how async callers use these blocking methods: an operation is first tried on the calling thread
(the event loop's) without waiting for anything, and only when it would wait (the write lock is held by
another thread, or SQLite reports the file busy: another process writes, a checkpoint recovers) does it
run again in a worker thread, where it may wait. An uncontended store operation (a few statements, well
under a millisecond) therefore costs no thread hops: on a busy machine each hop is a wake-up that may queue
behind other processes for milliseconds. Commits are unchanged (same journal mode, same `synchronous`), so
what was durable is durable. The non-waiting writer connection never checkpoints inside a commit (the
checkpoint syncs the files); a background thread does, every `CHECKPOINT_EVERY` commits, and lets the WAL
start over (see `checkpoint`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from agent_core.store.schema import INDEXES

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0
# Commits of the non-waiting writer between two background checkpoints. A plain turn commits twice and
# writes a few pages each time: about SQLite's own default of a checkpoint every 1000 WAL pages.
CHECKPOINT_EVERY = 100
# SQLite's primary result codes for "another connection holds a lock": wait for it (in a worker thread).
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})

T = TypeVar("T")


class WouldBlock(Exception):
    """A non-waiting attempt met a lock: the operation (nothing of it written) must run where it may wait."""


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in _BUSY_CODES


def _index_columns() -> str:
    return "".join(f", {index.pk} TEXT, {index.sk} TEXT" for index in INDEXES)


def _schema() -> str:
    # Items by (pk, sk), the whole item as JSON, the GSI keys (indexed) and the TTL attribute as columns.
    # The GSI indexes are partial (sparse like DynamoDB's: only items holding both keys are in them).
    statements = [
        f"CREATE TABLE IF NOT EXISTS items (pk TEXT NOT NULL, sk TEXT NOT NULL, data TEXT NOT NULL"
        f"{_index_columns()}, ttl INTEGER, PRIMARY KEY (pk, sk)) WITHOUT ROWID",
        *(
            f"CREATE INDEX IF NOT EXISTS items_{i.name} ON items ({i.pk}, {i.sk}, pk, sk) WHERE {i.sk} IS NOT NULL"
            for i in INDEXES
        ),
        # No index on the TTL column: only the sweep at open reads it (a scan, ~25 ms for 100,000 items of ~125
        # MB in the OS cache), while every turn writes TTL'd items (the run pointer, the usage rows): an index
        # would be one more page in their commits. Databases made before drop theirs.
        "DROP INDEX IF EXISTS items_ttl",
        # Data files: the bytes live in files beside the database, named by the key's hash.
        "CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, file TEXT NOT NULL, size INTEGER NOT NULL,"
        " content_type TEXT NOT NULL)",
        # The local work queue's jobs, from enqueue until they have run (drained at the next start).
        "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL,"
        " due_at REAL NOT NULL)",
        f"PRAGMA user_version = {SCHEMA_VERSION}",
    ]
    return ";\n".join(statements) + ";"


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix` (None: no bound), so a prefix match
    is the range `prefix <= s < prefix_end(prefix)`: SQLite compares text as UTF-8 bytes, which orders as
    code points do, and a range also holds for text with NUL characters, which substr() stops at."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop()) + 1
        if last == 0xD800:  # surrogates cannot be encoded: the next code point is U+E000
            last = 0xE000
        if last <= 0x10FFFF:
            return "".join(chars) + chr(last)
    return None


class SqliteDatabase:
    """A database file: a reader connection per thread, one writer connection, writes serialised."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        self._writer = self._connect()
        with self._write_lock:
            self._writer.executescript(_schema())
        # The writer of non-waiting attempts: no busy wait, and no checkpoint inside its commits.
        self._nowait_writer = self._connect(timeout=0.0)
        self._nowait_writer.execute("PRAGMA wal_autocheckpoint=0")
        self._commits_since_checkpoint = 0
        self._checkpointing = threading.Lock()

    def _connect(self, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError(f"database {self.path} is closed")
        connection = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        # With WAL, NORMAL survives a crash of the process (not of the machine) and needs no fsync per commit.
        connection.execute("PRAGMA synchronous=NORMAL")
        with self._connections_lock:
            self._connections.append(connection)
        return connection

    def _nowait(self) -> bool:
        return bool(getattr(self._local, "nowait", False))

    def _reader(self) -> sqlite3.Connection:
        name = "nowait_connection" if self._nowait() else "connection"
        connection: sqlite3.Connection | None = getattr(self._local, name, None)
        if connection is None:
            connection = self._connect(timeout=0.0 if self._nowait() else BUSY_TIMEOUT_S)
            setattr(self._local, name, connection)
        return connection

    def _would_block(self, error: sqlite3.OperationalError) -> None:
        """Raise WouldBlock when `error` is a non-waiting attempt meeting a lock (the caller re-raises others)."""
        if self._nowait() and _is_busy(error):
            raise WouldBlock(str(error)) from error

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection a read runs on. A non-waiting read takes the writer's connection when the write lock is
        free (holding the lock while it reads, so it never sees a write in progress): a connection drops its
        whole page cache when it finds that another connection has committed since its last transaction, and the
        writer commits every turn, so the writer's cache is the warm one. Otherwise this thread's reader."""
        if self._nowait() and self._write_lock.acquire(blocking=False):
            try:
                yield self._nowait_writer
            finally:
                self._write_lock.release()
        else:
            yield self._reader()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot)."""
        with self._reading() as connection:
            connection.execute("BEGIN")
            try:
                yield connection
            except sqlite3.OperationalError as error:
                self._would_block(error)
                raise
            finally:
                connection.execute("COMMIT")

    def select(self, sql: str, args: Any = ()) -> list[Any]:
        """The rows of one SELECT: one statement is its own snapshot, so it needs no BEGIN / COMMIT around it."""
        try:
            with self._reading() as connection:
                return connection.execute(sql, args).fetchall()
        except sqlite3.OperationalError as error:
            self._would_block(error)
            raise

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all or nothing, one writer at a time."""
        nowait = self._nowait()
        if not self._write_lock.acquire(blocking=not nowait):
            raise WouldBlock("the write lock is held by another thread")
        try:
            connection = self._nowait_writer if nowait else self._writer
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                self._would_block(error)
                raise
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if nowait:
                self._count_commit()
        finally:
            self._write_lock.release()

    def attempt(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on this thread if none of its reads and writes has to wait; WouldBlock (having written
        nothing: a write transaction that cannot start, or fails, is rolled back) if one would."""
        self._local.nowait = True
        try:
            return fn(*args)
        finally:
            self._local.nowait = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)`, a blocking operation made of `read`, `select` and `write` calls that may safely run a
        second time after WouldBlock: on this thread when nothing has to wait, else in a worker thread."""
        try:
            return self.attempt(fn, *args)
        except WouldBlock:
            return await asyncio.to_thread(fn, *args)

    def _count_commit(self) -> None:
        # Called under the write lock.
        self._commits_since_checkpoint += 1
        if self._commits_since_checkpoint >= CHECKPOINT_EVERY and not self._checkpointing.locked():
            self._commits_since_checkpoint = 0
            threading.Thread(target=self.checkpoint, name="sqlite-checkpoint", daemon=True).start()

    def checkpoint(self) -> None:
        """Copy the WAL's committed pages into the database file, as SQLite's automatic checkpoint would, and
        start the WAL over; on a connection of its own that never waits for a lock, closed after.

        First PASSIVE while this process's writers go on: the bulk of the copy and its syncs. SQLite starts the
        log over only when a writer finds every frame of it copied, which never happens while commits keep
        coming (a checkpoint ends behind the commits made during it), so under steady load the WAL would grow
        without bound, every frame an append to the file, and a connection that does checkpoint in its commits
        (the waiting writer) would checkpoint in each. So then, holding the write lock (a short pause: this
        process's writes wait in a worker meanwhile), a RESTART copies the few frames appended since and
        resets the log. Busy (another process writes, a reader is on an older snapshot), it leaves the log as
        it is until the next time."""
        with self._checkpointing:
            if self._closed:
                return
            connection = self._connect(timeout=0.0)
            try:
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                with self._write_lock:
                    connection.execute("PRAGMA wal_checkpoint(RESTART)")
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise
            finally:
                with self._connections_lock:
                    self._connections.remove(connection)
                connection.close()

    def close(self) -> None:
        with self._checkpointing, self._write_lock, self._connections_lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections.clear()
