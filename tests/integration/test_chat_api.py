"""The conversation API end to end on the in-memory store: routes, errors, idempotency, leases, tools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings


def _context(llm: Any = None, audit: list[dict[str, Any]] | None = None, **settings: Any) -> AppContext:
    sink = audit.append if audit is not None else (lambda line: None)
    return build_context(make_settings(**settings), table=MemoryTable(), llm=llm, audit=sink)


@pytest.fixture
async def client(ctx: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(ctx) as c:
        yield c


def _client(context: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(*routes.chat, context=context)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": user}
    )


async def _conversation(client: httpx.AsyncClient, title: str = "t") -> str:
    response = await client.post("/api/v1/conversations", json={"title": title})
    assert response.status_code == 201
    return str(response.json()["conversationId"])


async def _messages(client: httpx.AsyncClient, cid: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/conversations/{cid}/messages", params={"limit": 100})
    assert response.status_code == 200
    return list(response.json()["items"])


async def test_conversation_crud_and_listing(client: httpx.AsyncClient) -> None:
    # Given two conversations
    first = await _conversation(client, "first")
    second = await _conversation(client, "second")
    # When one gets a message, it moves to the top of the listing
    assert (await client.post(f"/api/v1/conversations/{first}/chat", json={"message": "hello"})).status_code == 200
    listing = (await client.get("/api/v1/conversations")).json()
    assert [i["conversationId"] for i in listing["items"]] == [first, second]
    assert set(listing["items"][0]) == {"conversationId", "title", "createdAt", "lastActivityAt"}
    # Then a page of one has a cursor to the next
    page = (await client.get("/api/v1/conversations", params={"limit": 1})).json()
    nxt = (await client.get("/api/v1/conversations", params={"limit": 1, "cursor": page["nextCursor"]})).json()
    assert [i["conversationId"] for i in page["items"] + nxt["items"]] == [first, second]
    # And delete removes it with its messages
    assert (await client.delete(f"/api/v1/conversations/{first}")).status_code == 204
    assert (await client.get(f"/api/v1/conversations/{first}")).status_code == 404
    assert (await client.get(f"/api/v1/conversations/{first}/messages")).status_code == 404


async def test_foreign_conversation_is_404_everywhere(ctx: AppContext) -> None:
    async with _client(ctx, "alice") as alice, _client(ctx, "mallory") as mallory:
        cid = await _conversation(alice)
        for method, path, body in [
            ("GET", f"/api/v1/conversations/{cid}", None),
            ("GET", f"/api/v1/conversations/{cid}/messages", None),
            ("POST", f"/api/v1/conversations/{cid}/chat", {"message": "hi"}),
            ("DELETE", f"/api/v1/conversations/{cid}", None),
        ]:
            response = await mallory.request(method, path, json=body)
            assert response.status_code == 404, (method, path)
            assert response.json()["error"]["code"] == "conversation_not_found"
        assert (await mallory.get("/api/v1/conversations")).json()["items"] == []
        assert (await alice.get(f"/api/v1/conversations/{cid}")).status_code == 200


async def test_offline_model_calls_the_time_tool_and_messages_are_saved_in_order(
    client: httpx.AsyncClient, audit_lines: list[dict[str, Any]]
) -> None:
    cid = await _conversation(client)
    response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "what time is it in Tokyo?"})
    body = response.json()
    assert response.status_code == 200
    assert body["assistantMessage"].startswith("[offline model]") and "Asia/Tokyo" in body["assistantMessage"]
    assert [(c["toolName"], c["status"], c["reason"]) for c in body["toolCalls"]] == [("time", "ok", "")]
    assert set(body["toolCalls"][0]) == {"id", "toolName", "status", "reason", "durationMs"}
    items = await _messages(client, cid)
    assert [m["role"] for m in items] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert items[1]["toolCalls"][0]["id"] == items[2]["toolCallId"] == body["toolCalls"][0]["id"]
    assert [(a["toolName"], a["status"], a["conversationId"]) for a in audit_lines] == [("time", "ok", cid)]


@pytest.mark.parametrize(
    ("payload", "status", "code", "param"),
    [
        ({"message": "   "}, 422, "blank_message", "message"),
        ({"message": "字" * 11000}, 413, "message_too_large", "message"),
        ({}, 422, "invalid_request", "message"),
        ({"message": 5}, 422, "invalid_request", "message"),
    ],
)
async def test_bad_messages_get_clear_errors(
    client: httpx.AsyncClient, payload: dict[str, Any], status: int, code: str, param: str
) -> None:
    cid = await _conversation(client)
    response = await client.post(f"/api/v1/conversations/{cid}/chat", json=payload)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code and response.json()["error"]["param"] == param
    assert await _messages(client, cid) == []


async def test_malformed_json_is_422_with_param(client: httpx.AsyncClient) -> None:
    cid = await _conversation(client)
    response = await client.post(
        f"/api/v1/conversations/{cid}/chat", content=b'{"message": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == "body" and error["type"] == "invalid_request_error"


async def test_request_id_retry_returns_the_stored_result_and_writes_nothing_twice(client: httpx.AsyncClient) -> None:
    cid = await _conversation(client)
    first = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi", "requestId": "r-1"})
    again = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hi", "requestId": "r-1"})
    header = await client.post(
        f"/api/v1/conversations/{cid}/chat", json={"message": "hi"}, headers={"X-Request-Id": "r-1"}
    )
    assert first.status_code == again.status_code == header.status_code == 200
    assert first.json() == again.json() == header.json()
    assert first.json()["requestId"] == "r-1"
    assert [m["role"] for m in await _messages(client, cid)] == ["USER", "ASSISTANT"]


async def test_concurrent_turn_on_a_busy_chat_is_409_and_the_first_completes() -> None:
    # Given a model that holds its first answer until released
    gate = asyncio.Event()
    llm = ScriptedLlm(Reply(text="first answer", gate=gate))
    context = _context(llm)
    async with _client(context) as client:
        cid = await _conversation(client)
        first = asyncio.create_task(client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "one"}))
        await llm.called.wait()
        # When a second turn arrives while the first holds the lease
        second = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "two"})
        # Then it is refused without writing anything
        assert second.status_code == 409 and second.json()["error"]["code"] == "run_in_progress"
        gate.set()
        assert (await first).json()["assistantMessage"] == "first answer"
        assert [m["content"] for m in await _messages(client, cid)] == ["one", "first answer"]
        # And the lease is released for the next turn
        assert (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "three"})).status_code == 200


async def test_llm_failure_is_502_user_message_kept_no_assistant_message_lease_released() -> None:
    from agent_core.errors import LlmUnavailable

    llm = ScriptedLlm(Reply(error=LlmUnavailable("LLM request failed: 500 after 3 retries")))
    async with _client(_context(llm)) as client:
        cid = await _conversation(client)
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hello", "requestId": "r9"})
        assert response.status_code == 502 and response.json()["error"]["code"] == "llm_unavailable"
        assert [m["role"] for m in await _messages(client, cid)] == ["USER"]
        # A retry of the same request runs again for the stored message, without duplicating it
        retry = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hello", "requestId": "r9"})
        assert retry.status_code == 200 and retry.json()["assistantMessage"] == "ok"
        assert [m["role"] for m in await _messages(client, cid)] == ["USER", "ASSISTANT"]


async def test_parallel_tool_calls_unknown_tools_and_bad_arguments_are_results_and_the_turn_goes_on() -> None:
    llm = ScriptedLlm(
        Reply(
            tool_calls=[
                ("call_a", "time", {"timezone": "Europe/Paris"}),
                ("call_b", "no_such_tool", {}),
                ("call_c", "time", {"timezone": 5}),
            ]
        ),
        Reply(text="done"),
    )
    audit: list[dict[str, Any]] = []
    async with _client(_context(llm, audit)) as client:
        cid = await _conversation(client)
        body = (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "go"})).json()
    outcome = {c["id"]: (c["status"], c["reason"]) for c in body["toolCalls"]}
    assert outcome == {
        "call_a": ("ok", ""),
        "call_b": ("error", "not_registered"),
        "call_c": ("error", "invalid_arguments"),
    }
    assert body["assistantMessage"] == "done"
    second = llm.requests[1].messages
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["call_a", "call_b", "call_c"]
    assert sorted(a["toolName"] for a in audit) == ["no_such_tool", "time", "time"]


async def test_http_get_to_a_private_address_is_denied_blocked_address() -> None:
    llm = ScriptedLlm(Reply(tool_calls=[("call_1", "http_get", {"url": "http://169.254.169.254/latest/"})]))
    async with _client(_context(llm)) as client:
        cid = await _conversation(client)
        body = (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "x"})).json()
    assert [(c["status"], c["reason"]) for c in body["toolCalls"]] == [("denied", "blocked_address")]


async def test_max_steps_bounds_model_calls() -> None:
    llm = ScriptedLlm(*[Reply(tool_calls=[(f"call_{i}", "time", {})]) for i in range(20)])
    async with _client(_context(llm)) as client:
        cid = await _conversation(client)
        body = (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "loop"})).json()
    assert body["finishReason"] == "max_steps"
    # Eight steps, then one answer call that offers no tools (its calls are not run)
    assert len(llm.requests) == 9 and len(body["toolCalls"]) == 8 and llm.requests[-1].tools == []


async def test_turn_deadline_is_504_deadline_exceeded_and_stores_no_partial_answer() -> None:
    llm = ScriptedLlm(Reply(text="partial answer", hang=True))
    async with _client(_context(llm, AGENT_TURN_DEADLINE_MS="100")) as client:
        cid = await _conversation(client)
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "slow"})
        # An outage is not an answer: an error status with a stable code, never a 200 with ""
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "deadline_exceeded"
        assert [m["role"] for m in await _messages(client, cid)] == ["USER"]
        assert (await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "next"})).status_code == 200


async def test_compaction_runs_after_the_turn_and_replaces_the_summary() -> None:
    llm = ScriptedLlm()
    context = _context(llm, AGENT_MEMORY_WINDOW="2", AGENT_MEMORY_COMPACT_AFTER="4")
    async with _client(context) as client:
        cid = await _conversation(client)
        for i in range(4):
            await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": f"m{i}"})
            await context.background.join()
        summary = await context.deps.memory_store.get_summary(cid)
        assert summary is not None and summary.content == "summary of earlier messages"
        # The next turn's window: system prompt, summary, then only uncovered messages
        await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "latest"})
        window = llm.requests[-1].messages
        assert window[1]["role"] == "system" and "summary of earlier messages" in window[1]["content"]
        assert all(m.get("content") != "m0" for m in window)
        assert len(await _messages(client, cid)) == 10  # raw messages are kept
