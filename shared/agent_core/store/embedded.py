"""Embedded storage for local runs: one SQLite database and a directory of data files under AGENT_DATA_DIR.

`agent-core serve` (and `make run`) keep chats, runs, summaries, profiles, data files and queued jobs here,
so they survive a restart; production uses DynamoDB and S3 (AGENT_STORAGE=aws). `ensure_resources` creates
the DynamoDB table and S3 bucket on moto (tests) or a fresh account.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agent_core.config import Settings
from agent_core.store.file_blob import FileBlobStore
from agent_core.store.schema import TTL_ATTRIBUTE, create_table_kwargs
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_jobs import SqliteJobJournal
from agent_core.store.sqlite_table import SqliteTable

DATABASE_FILE = "agent-core.sqlite3"
FILES_DIR = "files"
SERVER_LOCK = "server.lock"


class DataDirInUse(RuntimeError):
    """Another `agent-core serve` holds the data directory."""


@dataclass
class EmbeddedStorage:
    db: SqliteDatabase
    table: SqliteTable
    blobs: FileBlobStore
    jobs: SqliteJobJournal


_lock = threading.Lock()
_open: dict[Path, EmbeddedStorage] = {}


def open_embedded(settings: Settings) -> EmbeddedStorage:
    """The embedded storage in `settings.data_dir`, opened once per process (one writer lock per file).

    Opening deletes items whose TTL has passed, as DynamoDB does in the background."""
    directory = Path(settings.data_dir).expanduser().resolve()
    with _lock:
        storage = _open.get(directory)
        if storage is None:
            db = SqliteDatabase(directory / DATABASE_FILE)
            table = SqliteTable(db)
            table.sweep_expired()
            storage = EmbeddedStorage(db, table, FileBlobStore(db, directory / FILES_DIR), SqliteJobJournal(db))
            _open[directory] = storage
        return storage


def claim_data_dir(settings: Settings) -> TextIO:
    """Hold `settings.data_dir` for this server's lifetime: an exclusive lock on a file in it, which the OS
    frees when the process ends, however it ends (kill -9 included). A second server on the same directory
    raises DataDirInUse: one server per directory is what lets a starting server treat every run lease it
    finds there as a dead process's (runtime/interrupted.py). Keep the returned file open."""
    directory = Path(settings.data_dir).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    handle = (directory / SERVER_LOCK).open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise DataDirInUse(f"{directory} is in use by another agent-core server (pid {holder})") from None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def close_embedded(settings: Settings) -> None:
    """Close the storage of `settings.data_dir` if this process opened it."""
    directory = Path(settings.data_dir).expanduser().resolve()
    with _lock:
        storage = _open.pop(directory, None)
    if storage is not None:
        storage.db.close()


def ensure_resources(settings: Settings, dynamodb: Any, s3: Any) -> None:
    """Create the table (with TTL) and the data bucket if they do not exist yet."""
    existing = dynamodb.list_tables().get("TableNames", [])
    if settings.table_name not in existing:
        dynamodb.create_table(**create_table_kwargs(settings.table_name))
        dynamodb.update_time_to_live(
            TableName=settings.table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    buckets = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if settings.data_bucket not in buckets:
        kwargs: dict[str, Any] = {"Bucket": settings.data_bucket}
        if settings.aws_region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": settings.aws_region}
        s3.create_bucket(**kwargs)
