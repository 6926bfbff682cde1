"""In-memory BlobStore: the S3 adapter's behaviour for tests and AGENT_STORAGE=memory."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from agent_core.store.blob import Blob, BlobInfo


class MemoryBlobStore:
    """The BlobStore port on a dict; presigned URLs are `memory://` links nothing can fetch."""

    def __init__(self) -> None:
        self.objects: dict[str, Blob] = {}

    async def put(self, key: str, body: bytes, content_type: str) -> None:
        self.objects[key] = Blob(key, bytes(body), content_type)

    async def head(self, key: str) -> BlobInfo | None:
        blob = self.objects.get(key)
        return BlobInfo(key, len(blob.body), blob.content_type) if blob else None

    async def get(self, key: str) -> Blob | None:
        blob = self.objects.get(key)
        return Blob(blob.key, blob.body, blob.content_type) if blob else None

    async def presign_get(self, key: str, expires_s: int, *, download_name: str | None = None) -> str:
        query: dict[str, str] = {"expires": str(expires_s)}
        if download_name is not None:
            query["download"] = download_name
        return f"memory://{quote(key, safe='/')}?{urlencode(query, quote_via=quote)}"

    async def delete_prefix(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("refusing to delete an empty prefix (the whole store)")
        for key in [k for k in self.objects if k.startswith(prefix)]:
            del self.objects[key]
