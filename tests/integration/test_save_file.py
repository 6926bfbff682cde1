"""The save_file tool on the in-memory store and on S3 (moto): stores, links, validates."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.store.blob import BlobStore
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.tools.base import ToolContext, ToolFailure
from agent_core.tools.builtin.save_file import MAX_FILE_BYTES, PNG_SIGNATURE, SaveFileArgs, SaveFileTool
from agent_core.tools.data_token import verify_data_token
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService
from tests.support.fixtures import make_settings

SECRET = "save-file-secret-link-key-32-bytes"
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
PNG = PNG_SIGNATURE + b"\x00\x00\x00\rIHDR" + bytes(range(256))


def _ctx(blobs: BlobStore | None, conversation_id: str = "c_chat1") -> ToolContext:
    settings = make_settings(AGENT_DATA_TOKEN_SECRET=SECRET)
    return ToolContext(
        request_id="r1",
        conversation_id=conversation_id,
        user_id="alice",
        settings=settings,
        timezone="UTC",
        now=NOW,
        blobs=blobs,
    )


async def _save(ctx: ToolContext, **args: Any) -> Any:
    return await SaveFileTool().run(SaveFileArgs.model_validate(args), ctx)


@pytest.fixture
def blobs(any_blobs: BlobStore) -> BlobStore:
    """Each test using this runs on MemoryBlobStore and on S3BlobStore over moto."""
    return any_blobs


def _link_parts(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    return parts.path, query["file"][0], query["t"][0]


async def test_stores_text_and_returns_a_verifiable_link(blobs: BlobStore) -> None:
    ctx = _ctx(blobs)
    result = await _save(ctx, name="report.csv", content="a,b\n1,2\n", mediaType="text/csv")
    assert result["file"] == "c_chat1/report.csv"
    assert result["mediaType"] == "text/csv"
    assert result["size"] == 8
    stored = await blobs.get("data/c_chat1/report.csv")
    assert stored is not None
    assert stored.body == b"a,b\n1,2\n"
    assert stored.content_type == "text/csv; charset=utf-8"
    path, file, token = _link_parts(result["url"])
    assert (path, file) == ("/api/ap/data", "c_chat1/report.csv")
    verify_data_token(SECRET, token, "c_chat1", file, NOW.timestamp() + 3599)


async def test_png_content_is_base64_decoded(blobs: BlobStore) -> None:
    ctx = _ctx(blobs)
    encoded = base64.b64encode(PNG).decode()
    result = await _save(ctx, name="charts/q1.png", content=encoded, mediaType="image/png")
    assert (result["file"], result["size"]) == ("c_chat1/charts/q1.png", len(PNG))
    info = await blobs.head("data/c_chat1/charts/q1.png")
    assert info is not None
    assert (info.size, info.content_type) == (len(PNG), "image/png")
    stored = await blobs.get("data/c_chat1/charts/q1.png")
    assert stored is not None and stored.body == PNG
    # A data URL prefix and line breaks are tolerated
    wrapped = "data:image/png;base64," + "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60))
    again = await _save(ctx, name="q2.png", content=wrapped, mediaType="image/png")
    assert again["size"] == len(PNG)


async def test_unicode_names_are_quoted_in_the_link() -> None:
    blobs = MemoryBlobStore()
    result = await _save(_ctx(blobs), name="报告.txt", content="你好")
    assert result["mediaType"] == "text/plain"
    assert "%E6%8A%A5" in result["url"]
    _, file, token = _link_parts(result["url"])
    assert file == "c_chat1/报告.txt"
    verify_data_token(SECRET, token, "c_chat1", file, NOW.timestamp())
    assert (await blobs.get("data/c_chat1/报告.txt")) is not None


@pytest.mark.parametrize(
    "name",
    ["../x.txt", "/etc/passwd", "a/b/c.txt", ".hidden", "a\\b.txt", "%2e%2e/x", "a b.txt", "", "a\x00b", "dir/"],
)
async def test_invalid_names_are_refused(name: str) -> None:
    blobs = MemoryBlobStore()
    with pytest.raises(ToolFailure) as info:
        await _save(_ctx(blobs), name=name, content="x")
    assert (info.value.status, info.value.reason) == ("error", "invalid_arguments")
    assert blobs.objects == {}


@pytest.mark.parametrize(
    ("content", "media_type"),
    [
        ("not base64!", "image/png"),
        (base64.b64encode(b"GIF89a....").decode(), "image/png"),
        ("{not json", "application/json"),
        ("x" * (MAX_FILE_BYTES + 1), "text/plain"),
        (base64.b64encode(PNG_SIGNATURE + b"\0" * MAX_FILE_BYTES).decode(), "image/png"),
    ],
)
async def test_bad_content_is_refused(content: str, media_type: str) -> None:
    blobs = MemoryBlobStore()
    with pytest.raises(ToolFailure) as info:
        await _save(_ctx(blobs), name="f", content=content, mediaType=media_type)
    assert info.value.reason == "invalid_arguments"
    assert blobs.objects == {}


async def test_without_blob_store_or_chat_the_tool_fails() -> None:
    with pytest.raises(ToolFailure) as info:
        await _save(_ctx(None), name="a.txt", content="x")
    assert info.value.reason == "unavailable"
    with pytest.raises(ToolFailure) as bad_chat:
        await _save(_ctx(MemoryBlobStore(), conversation_id="../c"), name="a.txt", content="x")
    assert bad_chat.value.reason == "invalid_arguments"


async def test_governed_call_through_the_tool_service() -> None:
    # Given the tool in a registry, called the way the runtime calls it
    blobs = MemoryBlobStore()
    ctx = _ctx(blobs)
    tool = SaveFileTool()
    assert tool.permissions == frozenset({"data:write"}) and tool.kind == "backend"
    assert tool.schema()["function"]["parameters"]["properties"]["mediaType"]["enum"] == [
        "text/plain",
        "text/csv",
        "application/json",
        "image/png",
    ]
    service = ToolService(ToolRegistry([tool]), ctx.settings, audit=lambda line: None)
    arguments = json.dumps({"name": "n.json", "content": '{"a": 1}', "mediaType": "application/json"})
    execution = await service.execute(ToolCall(id="t1", name="save_file", arguments=arguments), ctx)
    assert execution.status == ToolStatus.OK
    assert execution.output["file"] == "c_chat1/n.json"
    # Without the data:write permission it is denied
    denied = ToolService(ToolRegistry([tool]), make_settings(AGENT_PERMISSIONS_GRANTED="net:read"), lambda _: None)
    refused = await denied.execute(ToolCall(id="t2", name="save_file", arguments=arguments), ctx)
    assert (refused.status, refused.reason) == (ToolStatus.DENIED, "missing_permission")
