"""GET /api/ap/data end to end: path checks, token or ownership, inline / attachment / presigned redirect."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agent_core.api.app import build_app
from agent_core.api.routes import data
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Chat
from agent_core.store.blob import BlobStore
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.data_token import sign_data_token
from tests.support.fixtures import make_settings, s3_blob_store

SECRET = "test-data-secret-link-key-32-bytes"
CHAT = "c_alice1"
CSV = b"a,b\n1,2\n"


def _context(blobs: BlobStore, **settings: Any) -> AppContext:
    return build_context(make_settings(AGENT_DATA_TOKEN_SECRET=SECRET, **settings), table=MemoryTable(), blobs=blobs)


async def _seed(ctx: AppContext, blobs: BlobStore) -> None:
    chat = Chat(chat_id=CHAT, user_id="alice", created_at=1, last_activity_at=1)
    await ctx.deps.chats.create_chat(chat)
    await blobs.put(f"data/{CHAT}/report.csv", CSV, "text/csv; charset=utf-8")
    await blobs.put(f"data/{CHAT}/charts/q1.png", b"\x89PNG\r\n\x1a\nxx", "image/png")


def _client(ctx: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(data.router, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": user}
    )


def _token(file: str = f"{CHAT}/report.csv", ttl: int = 600, now: float | None = None, **kw: Any) -> str:
    chat_id = file.split("/", 1)[0]
    return sign_data_token(SECRET, chat_id, file, ttl, time.time() if now is None else now, **kw)


@pytest.fixture
def memory_blobs() -> MemoryBlobStore:
    return MemoryBlobStore()


@pytest.fixture
async def memory_ctx(memory_blobs: MemoryBlobStore) -> AppContext:
    ctx = _context(memory_blobs)
    await _seed(ctx, memory_blobs)
    return ctx


@pytest.fixture
async def alice(memory_ctx: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(memory_ctx) as client:
        yield client


@pytest.fixture
async def bob(memory_ctx: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(memory_ctx, "bob") as client:
        yield client


async def _get(client: httpx.AsyncClient, **params: str) -> httpx.Response:
    return await client.get("/api/ap/data", params=params)


async def test_owner_gets_the_file_inline(alice: httpx.AsyncClient) -> None:
    response = await _get(alice, file=f"{CHAT}/report.csv")
    assert response.status_code == 200
    assert response.content == CSV
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"] == 'inline; filename="report.csv"'
    assert response.headers["x-content-type-options"] == "nosniff"
    png = await _get(alice, file=f"{CHAT}/charts/q1.png")
    assert png.status_code == 200
    assert png.headers["content-type"] == "image/png"
    assert png.headers["content-disposition"] == 'inline; filename="q1.png"'


async def test_download_answers_an_attachment(alice: httpx.AsyncClient) -> None:
    response = await _get(alice, file=f"{CHAT}/report.csv", download="1")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == 'attachment; filename="report.csv"'
    assert response.content == CSV
    inline = await _get(alice, file=f"{CHAT}/report.csv", download="0")
    assert inline.headers["content-disposition"].startswith("inline")


async def test_unicode_name_gets_an_rfc5987_filename(memory_blobs: MemoryBlobStore, alice: httpx.AsyncClient) -> None:
    await memory_blobs.put(f"data/{CHAT}/报告.txt", "你好".encode(), "text/plain; charset=utf-8")
    response = await _get(alice, file=f"{CHAT}/报告.txt", download="1")
    assert response.status_code == 200
    assert response.text == "你好"
    assert response.headers["content-disposition"] == (
        "attachment; filename=\"__.txt\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.txt"
    )


async def test_foreign_user_without_token_gets_404(bob: httpx.AsyncClient) -> None:
    response = await _get(bob, file=f"{CHAT}/report.csv")
    assert response.status_code == 404
    assert response.json() == {
        "error": {"code": "not_found", "message": "file not found", "type": "invalid_request_error", "param": "file"}
    }


async def test_valid_token_is_the_authorisation(bob: httpx.AsyncClient) -> None:
    response = await _get(bob, file=f"{CHAT}/report.csv", t=_token())
    assert response.status_code == 200
    assert response.content == CSV
    nested = await _get(bob, file=f"{CHAT}/charts/q1.png", t=_token(f"{CHAT}/charts/q1.png"))
    assert nested.status_code == 200


async def test_token_without_any_user_header(memory_ctx: AppContext) -> None:
    app = build_app(data.router, context=memory_ctx)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as anonymous:
        assert (await _get(anonymous, file=f"{CHAT}/report.csv", t=_token())).status_code == 200
        assert (await _get(anonymous, file=f"{CHAT}/report.csv")).status_code == 404


@pytest.mark.parametrize(
    ("token", "error_code"),
    [
        ("garbage", "TOKEN_INVALID"),
        (_token()[:-2] + "AA", "TOKEN_INVALID"),
        (
            sign_data_token("other-secret-data-link-key-32-bytes", CHAT, f"{CHAT}/report.csv", 600, time.time()),
            "TOKEN_INVALID",
        ),
        (_token(now=time.time() - 3600), "TOKEN_EXPIRED"),
        (_token(scope="ap_data:write"), "TOKEN_SCOPE_MISMATCH"),
        (_token(f"{CHAT}/charts/q1.png"), "TOKEN_FILE_MISMATCH"),
        (_token("c_other/report.csv"), "TOKEN_FILE_MISMATCH"),
    ],
)
async def test_token_errors_answer_403_with_the_error_code(
    alice: httpx.AsyncClient, token: str, error_code: str
) -> None:
    # Even the owner is refused when the token presented is bad
    response = await _get(alice, file=f"{CHAT}/report.csv", t=token)
    assert response.status_code == 403
    body = response.json()
    assert body["data"] == {"errorCode": error_code}
    assert body["error"]["code"] == "data_token_invalid"
    assert body["error"]["param"] == "t"
    assert body["error"]["type"] == "permission_error"


async def test_validation_disabled_falls_back_to_ownership() -> None:
    blobs = MemoryBlobStore()
    ctx = _context(blobs, AGENT_DATA_TOKEN_VALIDATION_ENABLED="false")
    await _seed(ctx, blobs)
    async with _client(ctx, "bob") as bob, _client(ctx) as alice:
        assert (await _get(bob, file=f"{CHAT}/report.csv", t=_token())).status_code == 404
        assert (await _get(alice, file=f"{CHAT}/report.csv", t="garbage")).status_code == 200


@pytest.mark.parametrize(
    "file",
    ["../x", f"{CHAT}/../../etc/passwd", "/etc/passwd", f"{CHAT}/%2e%2e/x", f"{CHAT}%2f..%2fx", f"{CHAT}/a%00b", ""],
)
async def test_bad_path_is_400_before_the_token_check(bob: httpx.AsyncClient, file: str) -> None:
    response = await _get(bob, file=file, t="garbage")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_path"
    assert response.json()["error"]["param"] == "file"
    assert "data" not in response.json()


async def test_missing_parameter_is_invalid_path(alice: httpx.AsyncClient) -> None:
    response = await alice.get("/api/ap/data")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_path"


async def test_missing_file_is_404(alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
    assert (await _get(alice, file=f"{CHAT}/nope.csv")).status_code == 404
    assert (await _get(bob, file=f"{CHAT}/nope.csv", t=_token(f"{CHAT}/nope.csv"))).status_code == 404
    assert (await _get(alice, file="c_unknown/report.csv")).status_code == 404


async def test_no_blob_store_is_503() -> None:
    ctx = build_context(make_settings(AGENT_DATA_TOKEN_SECRET=SECRET), table=MemoryTable())
    ctx.deps.blobs = None
    async with _client(ctx) as client:
        response = await _get(client, file=f"{CHAT}/x.csv", t=_token(f"{CHAT}/x.csv"))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "storage_unavailable"


async def test_large_object_redirects_to_a_short_lived_presigned_url(aws_env: None) -> None:
    blobs = s3_blob_store(make_settings(AGENT_DATA_TOKEN_SECRET=SECRET))
    ctx = _context(blobs)
    await _seed(ctx, blobs)
    await blobs.put(f"data/{CHAT}/big.bin", b"\0" * (4 * 1024 * 1024 + 1), "application/octet-stream")
    async with _client(ctx) as alice:
        small = await _get(alice, file=f"{CHAT}/report.csv")
        assert small.status_code == 200
        assert small.content == CSV
        assert small.headers["content-type"] == "text/csv; charset=utf-8"
        response = await _get(alice, file=f"{CHAT}/big.bin")
        assert response.status_code == 302
        location = urlsplit(response.headers["location"])
        query = parse_qs(location.query)
        assert query["X-Amz-Expires"] == ["60"]
        assert location.path.endswith(f"/data/{CHAT}/big.bin")
        assert "response-content-disposition" not in query
        download = await _get(alice, file=f"{CHAT}/big.bin", download="1")
        assert download.status_code == 302
        query = parse_qs(urlsplit(download.headers["location"]).query)
        assert query["response-content-disposition"] == ['attachment; filename="big.bin"']
        assert (await _get(alice, file=f"{CHAT}/gone.bin")).status_code == 404
