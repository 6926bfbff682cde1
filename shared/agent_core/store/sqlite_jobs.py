"""The local work queue's journal in the embedded database: a job is a row from enqueue until it has run,
so jobs enqueued before a restart (or a crash) run at the next start. Each operation runs through
`SqliteDatabase.run`, on the event loop's thread unless it would wait (a run's usage job is journalled on
every turn: no thread hop for it)."""

from __future__ import annotations

import time

from agent_core.domain.jobs import Job, dump_job, parse_job
from agent_core.store.sqlite_db import SqliteDatabase


class SqliteJobJournal:
    """Rows of the database's `jobs` table: (id, the job's JSON, when it is due in epoch seconds)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    def _add(self, job: Job, due_at: float) -> int:
        with self.db.write() as connection:
            cursor = connection.execute("INSERT INTO jobs (body, due_at) VALUES (?, ?)", (dump_job(job), due_at))
            return int(cursor.lastrowid or 0)

    async def add(self, job: Job, delay_s: float = 0) -> int:
        return await self.db.run(self._add, job, time.time() + delay_s)

    def _done(self, entry: int) -> None:
        with self.db.write() as connection:
            connection.execute("DELETE FROM jobs WHERE id = ?", (entry,))

    async def done(self, entry: int) -> None:
        await self.db.run(self._done, entry)

    def _pending(self) -> list[tuple[int, Job, float]]:
        with self.db.read() as connection:
            rows = connection.execute("SELECT id, body, due_at FROM jobs ORDER BY id").fetchall()
        return [(int(r[0]), parse_job(r[1]), float(r[2])) for r in rows]

    async def pending(self) -> list[tuple[int, Job, float]]:
        """Every job not yet run, oldest first, with its due time (epoch seconds)."""
        return await self.db.run(self._pending)
