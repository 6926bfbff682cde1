"""The BlobStore port: S3 objects (data files, large run snapshots)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Blob:
    key: str
    body: bytes
    content_type: str


@dataclass
class BlobInfo:
    key: str
    size: int
    content_type: str


class BlobStore(Protocol):
    async def put(self, key: str, body: bytes, content_type: str) -> None: ...

    async def head(self, key: str) -> BlobInfo | None: ...

    async def get(self, key: str) -> Blob | None: ...

    async def presign_get(self, key: str, expires_s: int, *, download_name: str | None = None) -> str: ...

    async def delete_prefix(self, prefix: str) -> None: ...
