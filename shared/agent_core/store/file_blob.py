"""Filesystem BlobStore for the embedded local store: bytes in files, keys in the database beside them.

A key never becomes a path: each object's bytes are written to `<dir>/<sha256 of the key>` (atomically, by
rename), and the key, size and content type are a row of the database's `blobs` table. So no key, whatever
it holds (`..`, absolute paths, NUL), can read or write outside the directory, and keys that S3 allows side
by side (`a` and `a/b`) never collide as a file and a directory would.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path
from urllib.parse import quote, urlencode

from agent_core.store.blob import Blob, BlobInfo
from agent_core.store.sqlite_db import SqliteDatabase, prefix_end


def _file_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class FileBlobStore:
    """The BlobStore port on a directory; presigned URLs are `file://` links (the data route serves embedded
    files itself, so no browser ever needs them)."""

    def __init__(self, db: SqliteDatabase, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.directory = directory

    def _put(self, key: str, body: bytes, content_type: str) -> None:
        name = _file_name(key)
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            with self.db.write() as connection:
                os.replace(temp, self.directory / name)
                connection.execute(
                    "INSERT OR REPLACE INTO blobs (key, file, size, content_type) VALUES (?, ?, ?, ?)",
                    (key, name, len(body), content_type),
                )
        finally:
            if os.path.exists(temp):
                os.unlink(temp)

    async def put(self, key: str, body: bytes, content_type: str) -> None:
        await asyncio.to_thread(self._put, key, bytes(body), content_type)

    def _head(self, key: str) -> tuple[str, int, str] | None:
        with self.db.read() as connection:
            row = connection.execute("SELECT file, size, content_type FROM blobs WHERE key = ?", (key,)).fetchone()
        return (str(row[0]), int(row[1]), str(row[2])) if row else None

    async def head(self, key: str) -> BlobInfo | None:
        row = await asyncio.to_thread(self._head, key)
        return BlobInfo(key, row[1], row[2]) if row else None

    def _get(self, key: str) -> Blob | None:
        row = self._head(key)
        if row is None:
            return None
        try:
            body = (self.directory / row[0]).read_bytes()
        except FileNotFoundError:  # deleted between the row and the read
            return None
        return Blob(key, body, row[2])

    async def get(self, key: str) -> Blob | None:
        return await asyncio.to_thread(self._get, key)

    async def presign_get(self, key: str, expires_s: int, *, download_name: str | None = None) -> str:
        query: dict[str, str] = {"expires": str(expires_s)}
        if download_name is not None:
            query["download"] = download_name
        return f"{(self.directory / _file_name(key)).as_uri()}?{urlencode(query, quote_via=quote)}"

    def _delete_prefix(self, prefix: str) -> None:
        with self.db.write() as connection:
            end = prefix_end(prefix)
            if end is None:
                rows = connection.execute("SELECT key, file FROM blobs WHERE key >= ?", (prefix,)).fetchall()
            else:
                rows = connection.execute(
                    "SELECT key, file FROM blobs WHERE key >= ? AND key < ?", (prefix, end)
                ).fetchall()
            connection.executemany("DELETE FROM blobs WHERE key = ?", [(r[0],) for r in rows])
            for _, name in rows:
                (self.directory / name).unlink(missing_ok=True)

    async def delete_prefix(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("refusing to delete an empty prefix (the whole store)")
        await asyncio.to_thread(self._delete_prefix, prefix)
