"""One SQLite database file for the embedded local store: connections, the schema, and transactions.

WAL mode, so readers never wait for the writer: each thread reads on its own connection, and every write
runs on one writer connection under a lock, inside `BEGIN IMMEDIATE` (which also takes SQLite's own write
lock, so a second process on the same file, e.g. `agent-core jobs` beside `agent-core serve`, waits its
turn instead of failing). Callers run these blocking methods in a worker thread.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_core.store.schema import INDEXES

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0


def _index_columns() -> str:
    return "".join(f", {index.pk} TEXT, {index.sk} TEXT" for index in INDEXES)


def _schema() -> str:
    # Items by (pk, sk), the whole item as JSON, the GSI keys and the TTL attribute as indexed columns.
    # The GSI indexes are partial (sparse like DynamoDB's: only items holding both keys are in them).
    statements = [
        f"CREATE TABLE IF NOT EXISTS items (pk TEXT NOT NULL, sk TEXT NOT NULL, data TEXT NOT NULL"
        f"{_index_columns()}, ttl INTEGER, PRIMARY KEY (pk, sk)) WITHOUT ROWID",
        *(
            f"CREATE INDEX IF NOT EXISTS items_{i.name} ON items ({i.pk}, {i.sk}, pk, sk) WHERE {i.sk} IS NOT NULL"
            for i in INDEXES
        ),
        "CREATE INDEX IF NOT EXISTS items_ttl ON items (ttl) WHERE ttl IS NOT NULL",
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

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError(f"database {self.path} is closed")
        connection = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        connection.execute("PRAGMA journal_mode=WAL")
        # With WAL, NORMAL survives a crash of the process (not of the machine) and needs no fsync per commit.
        connection.execute("PRAGMA synchronous=NORMAL")
        with self._connections_lock:
            self._connections.append(connection)
        return connection

    def _reader(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        return connection

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot) on this thread's connection."""
        connection = self._reader()
        connection.execute("BEGIN")
        try:
            yield connection
        finally:
            connection.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all or nothing, one writer at a time."""
        with self._write_lock:
            connection = self._writer
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def close(self) -> None:
        with self._write_lock, self._connections_lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections.clear()
