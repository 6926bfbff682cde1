"""One BlobStore behaviour on MemoryBlobStore and on S3BlobStore over moto."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from agent_core.store.blob import BlobStore
from agent_core.store.s3 import S3BlobStore


@pytest.fixture
def blobs(any_blobs: BlobStore) -> BlobStore:
    """Each test using this runs on MemoryBlobStore and on S3BlobStore over moto."""
    return any_blobs


async def test_put_head_get_and_missing(blobs: BlobStore) -> None:
    await blobs.put("data/c1/a.txt", b"hello", "text/plain; charset=utf-8")
    info = await blobs.head("data/c1/a.txt")
    assert info is not None
    assert (info.key, info.size, info.content_type) == ("data/c1/a.txt", 5, "text/plain; charset=utf-8")
    blob = await blobs.get("data/c1/a.txt")
    assert blob is not None
    assert (blob.body, blob.content_type) == (b"hello", "text/plain; charset=utf-8")
    assert await blobs.head("data/c1/missing") is None
    assert await blobs.get("data/c1/missing") is None


async def test_presign_names_the_download(blobs: BlobStore) -> None:
    await blobs.put("data/c1/a.txt", b"x", "text/plain")
    plain = parse_qs(urlsplit(await blobs.presign_get("data/c1/a.txt", 60)).query)
    named = parse_qs(urlsplit(await blobs.presign_get("data/c1/a.txt", 60, download_name="a.txt")).query)
    if isinstance(blobs, S3BlobStore):
        assert plain["X-Amz-Expires"] == ["60"] and "response-content-disposition" not in plain
        assert named["response-content-disposition"] == ['attachment; filename="a.txt"']
    else:
        assert plain == {"expires": ["60"]}
        assert named == {"expires": ["60"], "download": ["a.txt"]}


async def test_delete_prefix_removes_only_that_chat(blobs: BlobStore) -> None:
    for key in ("data/c1/a", "data/c1/d/b", "data/c10/a", "data/c2/a"):
        await blobs.put(key, b"x", "text/plain")
    await blobs.delete_prefix("data/c1/")
    assert await blobs.head("data/c1/a") is None
    assert await blobs.head("data/c1/d/b") is None
    assert await blobs.head("data/c10/a") is not None
    assert await blobs.head("data/c2/a") is not None
    await blobs.delete_prefix("data/none/")
    with pytest.raises(ValueError):
        await blobs.delete_prefix("")
