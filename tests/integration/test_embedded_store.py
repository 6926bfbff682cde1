"""The embedded local store (SQLite + files): durable across reopening, TTL, path-safe files, a job journal,
and many turns and transactions at once from asyncio tasks and threads with nothing lost or torn."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_core.context import build_context
from agent_core.domain.jobs import CompactJob, Job
from agent_core.domain.models import Chat, Message, Role, Run, RunStatus, TurnResult
from agent_core.errors import RunInProgress, ServiceUnavailable
from agent_core.jobs.inprocess import InProcessWorkQueue
from agent_core.store.embedded import close_embedded
from agent_core.store.file_blob import FileBlobStore
from agent_core.store.item_size import ITEM_LIMIT_BYTES
from agent_core.store.memory_table import MemoryTable
from agent_core.store.schema import PK, SK
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_jobs import SqliteJobJournal
from agent_core.store.sqlite_table import ItemTooLarge, SqliteTable
from agent_core.store.table import Condition, Put, SkRange, Table, TransactionFailed, Update, UpdateOp, eq, not_exists
from agent_core.store.table_store import TableStore
from tests.support.fixtures import make_settings
from tests.support.wait import apoll_until

T0 = 1_700_000_000_000
LEASE_MS = 600_000


def open_db(path: Path) -> SqliteDatabase:
    return SqliteDatabase(path / "agent-core.sqlite3")


# ---------------------------------------------------------------- durability, TTL


async def test_items_and_files_survive_closing_and_reopening(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    store = TableStore(SqliteTable(db))
    chat = Chat(chat_id="c_keep", user_id="alice", title="kept", created_at=T0, last_activity_at=T0)
    await store.create_chat(chat)
    run = Run(run_id="r1", chat_id=chat.chat_id, user_id="alice", request_id="q1", model="m", started_at=T0)
    user = Message(id="m1", chat_id=chat.chat_id, role=Role.USER, content="héllo 你好", created_at=T0)
    await store.begin_turn(chat, run, user, LEASE_MS)
    await FileBlobStore(db, tmp_path / "files").put("data/c_keep/notes.txt", b"meet at 3pm", "text/plain")
    db.close()

    db = open_db(tmp_path)
    store = TableStore(SqliteTable(db))
    page = await store.list_messages(chat.chat_id, "alice", 10, None)
    assert page is not None and [m.content for m in page.items] == ["héllo 你好"]
    stored_run = await store.get_run(chat.chat_id, "r1")
    assert stored_run is not None and stored_run.status == RunStatus.RUNNING
    assert [c.chat_id for c in (await store.list_chats("alice", 10, None)).items] == ["c_keep"]
    blob = await FileBlobStore(db, tmp_path / "files").get("data/c_keep/notes.txt")
    assert blob is not None and (blob.body, blob.content_type) == (b"meet at 3pm", "text/plain")
    db.close()


async def test_sweep_deletes_only_items_whose_ttl_has_passed(sqlite_table: SqliteTable) -> None:
    await sqlite_table.put({PK: "RUN#a", SK: "META", "expiresAt": 999})
    await sqlite_table.put({PK: "RUN#b", SK: "META", "expiresAt": 1001})
    await sqlite_table.put({PK: "RUN#c", SK: "META", "status": "no ttl"})
    assert sqlite_table.sweep_expired(now_s=1000) == 1
    assert await sqlite_table.get({PK: "RUN#a", SK: "META"}) is None
    assert await sqlite_table.get({PK: "RUN#b", SK: "META"}) is not None
    assert await sqlite_table.get({PK: "RUN#c", SK: "META"}) is not None


# ---------------------------------------------------------------- files


@pytest.mark.parametrize(
    "key", ["../../escape.txt", "/etc/passwd", "data/c1/../../../x", "data/c1/a\x00b", "data/c1/..", "C:\\x"]
)
async def test_file_store_keys_never_become_paths(tmp_path: Path, key: str) -> None:
    db = open_db(tmp_path / "db")
    files = tmp_path / "db" / "files"
    blobs = FileBlobStore(db, files)
    await blobs.put(key, b"secret", "text/plain")
    blob = await blobs.get(key)
    assert blob is not None and blob.body == b"secret"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".sqlite3" and "sqlite3" not in p.name]
    assert [p.parent for p in written] == [files]  # one file, inside the directory, whatever the key
    await blobs.delete_prefix(key)
    assert await blobs.get(key) is None and not any(files.iterdir())
    db.close()


async def test_file_store_keeps_keys_s3_allows_side_by_side(tmp_path: Path, sqlite_db: SqliteDatabase) -> None:
    blobs = FileBlobStore(sqlite_db, tmp_path / "files")
    await blobs.put("data/c1/a", b"file", "text/plain")
    await blobs.put("data/c1/a/b", b"nested", "text/plain")
    await blobs.put("data/c1/a", b"replaced", "application/json")
    info = await blobs.head("data/c1/a")
    assert info is not None and (info.size, info.content_type) == (8, "application/json")
    assert (await blobs.get("data/c1/a/b") or pytest.fail()).body == b"nested"


# ---------------------------------------------------------------- the job journal


async def test_a_job_interrupted_by_a_stop_runs_at_the_next_start(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    started = asyncio.Event()

    async def never_finishes(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    queue = InProcessWorkQueue(SqliteJobJournal(db))
    queue.serve(never_finishes)
    await queue.enqueue(CompactJob(chat_id="c_1", model="m"))
    await queue.enqueue(CompactJob(chat_id="c_2", model="m"), delay_s=3600)
    await started.wait()
    for task in list(queue._tasks):  # what a stop does to running tasks
        task.cancel()
    await asyncio.gather(*queue._tasks, return_exceptions=True)
    db.close()

    db = open_db(tmp_path)
    ran: list[str] = []

    async def handler(job: Job) -> None:
        assert isinstance(job, CompactJob)
        ran.append(job.chat_id)
        if job.chat_id == "c_2":
            raise RuntimeError("a failing job is logged and not retried forever")

    journal = SqliteJobJournal(db)
    pending = await journal.pending()
    assert [j.chat_id for _, j, _ in pending] == ["c_1", "c_2"]  # type: ignore[union-attr]
    assert pending[1][2] - pending[0][2] >= 3500  # the delayed job keeps its due time
    # Resume with the delayed job due now (its due time is part of the record, moved here, not waited for).
    with db.write() as connection:
        connection.execute("UPDATE jobs SET due_at = 0")
    queue = InProcessWorkQueue(journal)
    queue.serve(handler)
    assert await queue.resume() == 2
    await queue.join()
    assert sorted(ran) == ["c_1", "c_2"] and (queue.completed, queue.failed) == (1, 1)
    assert await journal.pending() == []
    db.close()


# ---------------------------------------------------------------- concurrency

CHATS = 4
TURNS_PER_WORKER = 6


async def _turns(store: TableStore, chat: Chat, worker: str, clock: list[int]) -> int:
    """Run TURNS_PER_WORKER turns on the chat, waiting for the lease when another worker holds it."""
    for n in range(TURNS_PER_WORKER):

        async def begin(n: int = n) -> tuple[Run, int] | None:
            clock[0] += 1
            at = T0 + clock[0]
            run = Run(
                run_id=f"r-{worker}-{n}",
                chat_id=chat.chat_id,
                user_id=chat.user_id,
                request_id=f"q-{worker}-{n}",
                model="m",
                started_at=at,
            )
            user = Message(
                id=f"{worker}-{n}-0", chat_id=chat.chat_id, role=Role.USER, content=f"u {worker} {n}", created_at=at
            )
            try:
                await store.begin_turn(chat, run, user, LEASE_MS)
            except (RunInProgress, ServiceUnavailable):  # held, or released between the write and its re-read
                return None
            return run, at

        # Each try lets the loop run: the worker holding the lease finishes its turn and releases it
        run, at = await apoll_until(begin, f"{worker} takes the lease of {chat.chat_id}", interval_s=0.001)
        answer = Message(
            id=f"{worker}-{n}-1", chat_id=chat.chat_id, role=Role.ASSISTANT, content=f"a {worker} {n}", created_at=at
        )
        done = run.model_copy(
            update={
                "status": RunStatus.COMPLETED,
                "result": TurnResult(request_id=run.request_id, assistant_message=""),
            }
        )
        await store.finish_turn(done, [answer], at)
    return TURNS_PER_WORKER


async def _counter(table: Table, worker: str, times: int) -> None:
    """Compare-and-swap increments of one shared counter, each in a transaction with an item of its own."""
    for n in range(times):
        while True:
            item = await table.get({PK: "COUNTER", SK: "META"})
            value = int(item["value"]) if item else 0
            guard = Condition.of(eq("value", value)) if item else Condition.of(not_exists(PK))
            try:
                await table.transact(
                    [
                        UpdateOp({PK: "COUNTER", SK: "META"}, Update(set={"value": value + 1}), guard),
                        Put({PK: "COUNTER", SK: f"BY#{worker}#{n}", "value": value + 1}, Condition.of(not_exists(PK))),
                    ]
                )
                break
            except TransactionFailed:
                continue  # another worker's increment came first: read the new value and try again


async def _check(table: Table, chats: list[Chat], workers: list[str], counts: int) -> None:
    store = TableStore(table)
    for chat in chats:
        page = await store.list_messages(chat.chat_id, chat.user_id, 1000, None)
        assert page is not None
        expected = {
            (f"{w}-{n}-{r}", f"{'ua'[r]} {w} {n}") for w in workers for n in range(TURNS_PER_WORKER) for r in (0, 1)
        }
        assert {(m.id, m.content) for m in page.items} == expected  # none lost, none torn, none duplicated
        meta = await store.get_chat(chat.chat_id, chat.user_id)
        assert meta is not None and meta.message_count == len(expected) and meta.active_run_id is None
    counter = await table.get({PK: "COUNTER", SK: "META"})
    steps = (await table.query("COUNTER", limit=None)).items
    assert counter is not None and counter["value"] == counts
    assert sorted(i["value"] for i in steps if i[SK] != "META") == list(range(1, counts + 1))  # no lost update


async def _seed(table: Table) -> list[Chat]:
    store = TableStore(table)
    chats = [
        Chat(chat_id=f"c_conc{i}", user_id="alice", title="", created_at=T0, last_activity_at=T0) for i in range(CHATS)
    ]
    for chat in chats:
        await store.create_chat(chat)
    return chats


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_many_tasks_doing_turns_and_transactions_lose_nothing(
    backend: str, request: pytest.FixtureRequest
) -> None:
    table: Table = MemoryTable() if backend == "memory" else request.getfixturevalue("sqlite_table")
    chats = await _seed(table)
    store, clock = TableStore(table), [0]
    workers = [f"t{i}" for i in range(3)]
    jobs = [_turns(store, chat, w, clock) for chat in chats for w in workers]
    jobs += [_counter(table, w, 10) for w in workers]
    await asyncio.gather(*jobs)
    await _check(table, chats, workers, 10 * len(workers))


async def test_threads_and_tasks_at_once_on_one_database_lose_nothing(sqlite_table: SqliteTable) -> None:
    """Three threads, each with its own event loop and its own tasks, on one SqliteTable."""
    chats = await _seed(sqlite_table)
    store = TableStore(sqlite_table)
    errors: list[BaseException] = []

    def thread_main(name: str) -> None:
        async def main() -> None:
            local = [0]
            jobs = [_turns(store, chat, f"{name}{i}", local) for chat in chats for i in range(2)]
            await asyncio.gather(*jobs, _counter(sqlite_table, name, 10))

        try:
            asyncio.run(main())
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=thread_main, args=(f"th{i}-",)) for i in range(3)]
    for thread in threads:
        thread.start()
    await asyncio.gather(_turns(store, chats[0], "loop", [0]), _counter(sqlite_table, "loop", 10))
    for thread in threads:
        await asyncio.to_thread(thread.join)
    assert errors == []
    workers = [f"th{t}-{i}" for t in range(3) for i in range(2)]
    for chat in chats[1:]:
        page = await store.list_messages(chat.chat_id, "alice", 1000, None)
        assert page is not None and len(page.items) == 2 * TURNS_PER_WORKER * len(workers)
    await _check(sqlite_table, chats[1:], workers, 40)
    first = await store.list_messages(chats[0].chat_id, "alice", 1000, None)
    assert first is not None and len(first.items) == 2 * TURNS_PER_WORKER * (len(workers) + 1)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_begins_with_holds_for_any_text(backend: str, request: pytest.FixtureRequest) -> None:
    """Prefixes with NUL, the last code point and the code point before the surrogates match exactly."""
    table: Table = MemoryTable() if backend == "memory" else request.getfixturevalue("sqlite_table")
    keys = ["a", "a\x00", "a\x00b", "a\x01", "a\ud7ff", "a\ud7ffz", "a\ue000", "a\U0010ffff", "a\U0010ffffz", "b"]
    for sk in keys:
        await table.put({PK: "P", SK: sk})
    for prefix in ["a", "a\x00", "a\ud7ff", "a\U0010ffff", "\U0010ffff", "b"]:
        page = await table.query("P", SkRange(begins_with=prefix))
        assert [i[SK] for i in page.items] == sorted(k for k in keys if k.startswith(prefix)), prefix


# ---------------------------------------------------------------- wiring and isolation


async def test_a_reader_is_not_blocked_by_an_open_write_and_never_sees_it_uncommitted(
    sqlite_db: SqliteDatabase, sqlite_table: SqliteTable
) -> None:
    with sqlite_db.read() as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    await sqlite_table.put({PK: "P", SK: "x", "v": "old"})
    written, release = threading.Event(), threading.Event()

    def writer() -> None:
        with sqlite_db.write() as connection:
            connection.execute("UPDATE items SET data = ? WHERE pk = 'P'", ('{"pk": "P", "sk": "x", "v": "new"}',))
            written.set()
            release.wait()

    thread = threading.Thread(target=writer)
    thread.start()
    await asyncio.to_thread(written.wait)
    # The write transaction is open (the writer holds the lock): a read still answers, with the committed value.
    assert await sqlite_table.get({PK: "P", SK: "x"}) == {PK: "P", SK: "x", "v": "old"}
    release.set()
    await asyncio.to_thread(thread.join)
    assert await sqlite_table.get({PK: "P", SK: "x"}) == {PK: "P", SK: "x", "v": "new"}


def test_embedded_settings_wire_the_sqlite_table_files_and_journal_on_one_database(tmp_path: Path) -> None:
    settings = make_settings(AGENT_STORAGE="embedded", AGENT_DATA_DIR=str(tmp_path / "data"))
    first, second = build_context(settings), build_context(settings)
    try:
        store, again = first.deps.chats, second.deps.chats
        assert isinstance(store, TableStore) and isinstance(again, TableStore)
        assert isinstance(store.table, SqliteTable) and isinstance(first.deps.blobs, FileBlobStore)
        assert store.table is again.table  # one database (one writer lock) per directory and process
        assert first.background._journal is not None
        assert (tmp_path / "data" / "agent-core.sqlite3").is_file() and (tmp_path / "data" / "files").is_dir()
    finally:
        close_embedded(settings)


def test_the_default_data_dir_is_agent_core_under_the_working_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    out = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "idle-sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**env, "AGENT_LLM_PROVIDER": "offline"},
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / ".agent-core" / "agent-core.sqlite3").is_file()


async def test_an_item_over_the_dynamodb_limit_is_refused_and_a_transaction_writes_nothing(
    sqlite_table: SqliteTable,
) -> None:
    big = "字" * (ITEM_LIMIT_BYTES // 3)  # 3 bytes each in UTF-8: just under the limit, with the names over it
    with pytest.raises(ItemTooLarge):
        await sqlite_table.put({PK: "P", SK: "big", "content": big + "xxxxxxxx"})
    await sqlite_table.put({PK: "P", SK: "fits", "c": "字" * (ITEM_LIMIT_BYTES // 3 - 10)})
    with pytest.raises(ItemTooLarge):
        await sqlite_table.transact(
            [Put({PK: "P", SK: "small", "v": "1"}), UpdateOp({PK: "P", SK: "fits"}, Update(set={"more": "x" * 100}))]
        )
    assert await sqlite_table.get({PK: "P", SK: "small"}) is None
    assert await sqlite_table.get({PK: "P", SK: "big"}) is None


async def test_attributes_whose_value_is_none_are_not_stored(sqlite_table: SqliteTable) -> None:
    """As the DynamoDB adapter drops them: by a put, a conditional put over an existing item and a transaction."""
    await sqlite_table.put({PK: "P", SK: "a", "x": None, "y": 1})
    await sqlite_table.put({PK: "P", SK: "a", "x": 2, "z": None}, Condition.of(eq("y", 1)))
    await sqlite_table.transact([Put({PK: "P", SK: "b", "x": None, "n": [None]})])
    assert await sqlite_table.get({PK: "P", SK: "a"}) == {PK: "P", SK: "a", "x": 2}
    assert await sqlite_table.get({PK: "P", SK: "b"}) == {PK: "P", SK: "b", "n": [None]}
