"""Every input is bounded, and a request over a bound is refused before the store or the model is touched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.types import Message

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings

KB = 1024


class RecordingTable(MemoryTable):
    """The in-memory table, recording every operation a request makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name in {"get", "batch_get", "query", "put", "update", "delete", "transact", "batch_delete"}:
            super().__getattribute__("calls").append(name)
        return value


@pytest.fixture
def table() -> RecordingTable:
    return RecordingTable()


@pytest.fixture
def llm() -> ScriptedLlm:
    return ScriptedLlm()


@pytest.fixture
def context(table: RecordingTable, llm: ScriptedLlm) -> AppContext:
    return build_context(make_settings(), table=table, llm=llm, audit=lambda line: None)


@pytest.fixture
def client(context: AppContext) -> Iterator[httpx.AsyncClient]:
    app = build_app(*routes.local, context=context)
    yield httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def _untouched(table: RecordingTable, llm: ScriptedLlm) -> None:
    assert table.calls == [] and table.item_count() == 0, table.calls
    assert llm.requests == []


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error", error
    return error


# ----- the body: AGENT_MAX_BODY_BYTES, enforced before the app reads it -----


async def test_a_body_over_the_limit_is_413_request_too_large_on_every_route(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    big = json.dumps({"message": "x" * (1100 * KB), "input": "y", "items": []})
    for path in ("/api/ap/query", "/api/v1/conversations", "/v1/responses", "/v1/conversations", "/api/ap/submit"):
        answer = await client.post(path, content=big, headers={"content-type": "application/json"})
        _error(answer, 413, "request_too_large")
    _untouched(table, llm)


async def _raw(app: Any, chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, int]:
    """Drive the ASGI app directly: the status, the body, and how many body bytes the app side read."""
    pending = list(chunks)
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        if not pending:
            return {"type": "http.disconnect"}
        chunk = pending.pop(0)
        read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read


@pytest.mark.parametrize("declared", [None, b"20"], ids=["no-content-length", "lying-content-length"])
async def test_a_long_body_is_refused_having_read_no_more_than_the_limit(
    context: AppContext, table: RecordingTable, llm: ScriptedLlm, declared: bytes | None
) -> None:
    # Given an 80 MB body sent in 64 KB chunks, without a Content-Length or with one that says 20 bytes
    app = build_app(*routes.local, context=context)
    chunk = b"x" * (64 * KB)
    chunks = [b'{"input": "'] + [chunk] * 1280
    headers = [(b"content-length", declared)] if declared else []
    status, body, read = await _raw(app, chunks, headers)
    # Then it is 413 request_too_large, after reading at most the limit plus one chunk
    assert status == 413 and json.loads(body)["error"]["code"] == "request_too_large"
    assert read <= context.settings.max_body_bytes + len(chunk)
    _untouched(table, llm)


async def test_a_declared_content_length_over_the_limit_is_refused_without_reading(
    context: AppContext, table: RecordingTable, llm: ScriptedLlm
) -> None:
    app = build_app(*routes.local, context=context)
    status, _, read = await _raw(app, [b"{}"], [(b"content-length", str(80 * KB * KB).encode())])
    assert (status, read) == (413, 0)
    _untouched(table, llm)


async def test_a_body_within_the_limit_reaches_the_route_whole(
    client: httpx.AsyncClient, table: RecordingTable
) -> None:
    # Sent in several chunks by the client, read whole by the route
    async def body() -> Any:
        for part in (b'{"title": ', b'"in parts"}'):
            yield part

    answer = await client.post("/api/v1/conversations", content=body(), headers={"content-type": "application/json"})
    assert answer.status_code == 201 and answer.json()["title"] == "in parts"
    assert "put" in table.calls  # (the recording table sees what a request does)


# ----- /v1/responses: items, item size, instructions, metadata -----


async def test_responses_input_items_are_bounded_in_number(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm, context: AppContext
) -> None:
    items = [{"role": "user", "content": "hi"}] * (context.settings.max_input_items + 1)
    error = _error(await client.post("/v1/responses", json={"input": items}), 400, "too_many_items")
    assert error["param"] == "input"
    _untouched(table, llm)


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"role": "user", "content": "x" * (40 * KB)}, "input[1].content"),
        ({"role": "user", "content": [{"type": "input_text", "text": "é" * (20 * KB)}]}, "input[1].content"),
        ({"type": "function_call_output", "call_id": "c1", "output": "x" * (40 * KB)}, "input[1].output"),
        ({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "x" * (40 * KB)}, "input[1].arguments"),
    ],
)
async def test_each_responses_input_item_is_bounded_by_max_message_bytes(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm, item: dict[str, Any], param: str
) -> None:
    body = {"input": [{"role": "user", "content": "first"}, item, {"role": "user", "content": "last"}]}
    error = _error(await client.post("/v1/responses", json=body), 413, "message_too_large")
    assert error["param"] == param
    _untouched(table, llm)


async def test_a_responses_string_input_is_bounded_too(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    error = _error(await client.post("/v1/responses", json={"input": "x" * (40 * KB)}), 413, "message_too_large")
    assert error["param"] == "input"
    _untouched(table, llm)


async def test_responses_instructions_are_bounded(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    # 262,144 characters of instructions (was a 500)
    body = {"input": "hi", "instructions": "i" * 262144}
    error = _error(await client.post("/v1/responses", json=body), 413, "instructions_too_large")
    assert error["param"] == "instructions"
    _untouched(table, llm)


@pytest.mark.parametrize(
    "metadata",
    [{"k": "v" * 513}, {"k" * 65: "v"}, {f"k{n}": "v" for n in range(17)}],
    ids=["long-value", "long-key", "17-pairs"],
)
async def test_metadata_has_openais_bounds(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm, metadata: dict[str, str]
) -> None:
    for path, body in (
        ("/v1/responses", {"input": "hi", "metadata": metadata}),
        ("/v1/conversations", {"metadata": metadata}),
    ):
        _error(await client.post(path, json=body), 400, "invalid_request")
    _untouched(table, llm)


async def test_a_lone_surrogate_is_not_text(client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm) -> None:
    raw = '{"input": "\\ud800 hello"}'
    answer = await client.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
    _error(answer, 400, "invalid_text")
    _untouched(table, llm)


# ----- the other routes -----


async def test_a_500_kb_item_to_v1_conversations_is_413(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    # (was a 500: the item exceeded what one stored message can hold)
    body = {"items": [{"type": "message", "role": "user", "content": "x" * (500 * KB)}]}
    error = _error(await client.post("/v1/conversations", json=body), 413, "message_too_large")
    assert error["param"] == "input[0].content"
    _untouched(table, llm)


async def test_items_added_to_a_conversation_are_checked_before_it_is_read(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    body = {"items": [{"type": "message", "role": "user", "content": "x" * (40 * KB)}]}
    _error(await client.post("/v1/conversations/c_missing/items", json=body), 413, "message_too_large")
    _untouched(table, llm)


async def test_chain_messages_are_bounded_in_number_and_size(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm, context: AppContext
) -> None:
    many = [{"role": "user", "content": "hi"}] * (context.settings.max_input_items + 1)
    _error(await client.post("/api/chat/stream", json={"messages": many}), 422, "too_many_items")
    big = [{"role": "assistant", "content": "x" * (40 * KB)}, {"role": "user", "content": "hi"}]
    error = _error(await client.post("/api/chat/stream", json={"messages": big}), 413, "message_too_large")
    assert error["param"] == "messages[0].content"
    last = [{"role": "user", "content": "x" * (40 * KB)}]
    _error(await client.post("/api/chat/stream", json={"messages": last}), 413, "message_too_large")
    _untouched(table, llm)


async def test_native_messages_are_bounded_before_any_work(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    big = {"message": "x" * (40 * KB)}
    _error(await client.post("/api/ap/query", json=big), 413, "message_too_large")
    _error(await client.post("/api/v1/conversations/c_any/chat", json=big), 413, "message_too_large")
    _untouched(table, llm)


async def test_submit_params_are_bounded(client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm) -> None:
    body = {"runId": "r1", "toolId": "t1", "params": {"text": "x" * (40 * KB)}}
    error = _error(await client.post("/api/ap/submit", json=body), 413, "message_too_large")
    assert error["param"] == "params"
    _untouched(table, llm)


def test_the_limits_are_settings() -> None:
    settings = make_settings(AGENT_MAX_BODY_BYTES="2048", AGENT_MAX_INPUT_ITEMS="3", AGENT_MAX_INSTRUCTIONS_BYTES="10")
    assert (settings.max_body_bytes, settings.max_input_items, settings.max_instructions_bytes) == (2048, 3, 10)
    defaults = make_settings()
    assert (defaults.max_body_bytes, defaults.max_input_items, defaults.max_instructions_bytes) == (
        1048576,
        500,
        65536,
    )


async def test_ids_in_paths_and_queries_are_bounded_before_any_read(
    client: httpx.AsyncClient, table: RecordingTable, llm: ScriptedLlm
) -> None:
    # (an id is a store key: DynamoDB refuses keys over 1-2 KB with an error that would be a 500)
    long = "c" * 3000
    _error(await client.get(f"/api/v1/conversations/{long}"), 422, "invalid_request")
    _error(await client.get("/api/ap/chat", params={"chatId": long}), 422, "invalid_request")
    _error(await client.get(f"/v1/conversations/{long}"), 400, "invalid_request")
    _error(await client.get(f"/v1/responses/{long}"), 400, "invalid_request")
    _error(await client.post("/v1/responses", json={"input": "hi", "conversation": long}), 400, "invalid_request")
    _untouched(table, llm)
