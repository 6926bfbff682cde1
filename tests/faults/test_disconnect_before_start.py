"""A client that leaves before the first byte: the turn already took the lease and stored the message.

The response body is then never iterated (ASGI < 2.4: Starlette sees `http.disconnect` and cancels the
response before it starts; ASGI 2.4, as uvicorn: sending the response start fails). The run does not depend
on its client (it runs in a task of its own, api/sse.py `Detached`): on every SSE route that prepares a
stored turn it still runs to its end, stores its answer and frees the lease before the response ends, and
its events can be resumed (GET /api/ap/runs/{runId}/events); the next turn is accepted at once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message

from agent_core.domain.models import Role, RunStatus
from agent_core.wires.client_turn import client_chat_id
from tests.faults.harness import USER, Harness
from tests.support.sse import events_in

QUESTION = "are you there?"


async def _gone_before_first_byte(app: Any, path: str, body: dict[str, Any], spec: str) -> list[Message]:
    """Drive the ASGI app directly: the request arrives whole, the client is gone before the response starts."""
    pending = [json.dumps(body).encode()]
    sent: list[Message] = []

    async def receive() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if spec == "2.4" and message["type"] == "http.response.start":
            raise OSError("connection reset by peer")  # what uvicorn raises when the peer has gone
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"faults"), (b"content-type", b"application/json"), (b"x-user-id", USER.encode())],
        "client": ("127.0.0.1", 1),
        "server": ("faults", 80),
    }
    try:
        await app(scope, receive, send)
    except Exception as error:  # ClientDisconnect (2.4) propagates out of the app, as under uvicorn
        assert type(error).__name__ == "ClientDisconnect", error
    return sent


def _ui_body(client_id: str) -> dict[str, Any]:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": QUESTION}]}
    return {"id": client_id, "messages": [message], "trigger": "submit-message"}


def _ag_body(thread: str) -> dict[str, Any]:
    message = {"id": "u1", "role": "user", "content": QUESTION}
    return {
        "threadId": thread,
        "runId": "r1",
        "state": {},
        "messages": [message],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def _assert_completed(h: Harness, chat_id: str) -> str:
    """The question stored once, its run completed with its answer stored, the lease free: the run's id."""
    chat = await h.store.get_chat(chat_id, USER)
    assert chat is not None and chat.active_run_id is None, "lease left held"
    runs, _ = await h.store.list_runs(chat_id, 10, None)
    assert len(runs) == 1
    run = await h.store.get_run(chat_id, runs[0].run_id)
    assert run is not None and run.status == RunStatus.COMPLETED, run and run.status
    assert run.snapshot is not None and run.snapshot[-1]["type"] == "run.complete"
    messages = await h.store.messages_between(chat_id, None, None)
    assert [m.content for m in messages if m.role == Role.USER] == [QUESTION]
    assert len([m for m in messages if m.role == Role.ASSISTANT]) == 1, "the run's answer is stored"
    assert len(h.stub.requests) == 1, "the run called the model although its client had gone"
    return run.run_id


async def _resumed_terminal(h: Harness, run_id: str) -> dict[str, Any]:
    """The run's events from the start, resumed from its log: its terminal event."""
    resumed = await h.client.get(f"/api/ap/runs/{run_id}/events")
    assert resumed.status_code == 200, resumed.text
    return events_in(resumed.text)[-1]


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_native_stream(harness: Harness, spec: str) -> None:
    chat_id = await harness.new_chat()
    body = {"message": QUESTION, "chatId": chat_id, "requestId": "gone-1"}
    sent = await _gone_before_first_byte(harness.app, "/api/ap/query", body, spec)
    assert not [m for m in sent if m["type"] == "http.response.body" and m.get("body")]
    run_id = await _assert_completed(harness, chat_id)
    assert (await _resumed_terminal(harness, run_id))["type"] == "run.complete"
    after = await harness.query(chat_id, "and now?", "next-1")
    assert after.status == 200 and after.terminal is not None and after.terminal["type"] == "run.complete"
    # The client's retry of the same requestId gets the stored answer (not a 409, not a second run)
    again = await harness.query(chat_id, QUESTION, "gone-1")
    assert again.status == 200 and again.terminal is not None and again.terminal["type"] == "run.complete"


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_ui_message_stream(harness: Harness, spec: str) -> None:
    await _gone_before_first_byte(harness.app, "/api/ui-stream", _ui_body("ui-gone"), spec)
    await _assert_completed(harness, client_chat_id(USER, "ui-gone"))
    next_body = _ui_body("ui-gone")
    next_body["messages"][0]["parts"][0]["text"] = "and now?"
    after = await harness.client.post("/api/ui-stream", json=next_body)
    assert after.status_code == 200 and after.text.rstrip().endswith("data: [DONE]"), after.text


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_ag_ui(harness: Harness, spec: str) -> None:
    await _gone_before_first_byte(harness.app, "/api/ag-ui", _ag_body("ag-gone"), spec)
    await _assert_completed(harness, client_chat_id(USER, "ag-gone"))
    next_body = _ag_body("ag-gone")
    next_body["messages"].append({"id": "u2", "role": "user", "content": "and now?"})
    after = await harness.client.post("/api/ag-ui", json=next_body)
    assert after.status_code == 200 and '"type":"RUN_FINISHED"' in after.text, after.text


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_responses_stream(harness: Harness, spec: str) -> None:
    chat_id = await harness.new_chat()
    body = {"model": "main-agent", "input": QUESTION, "conversation": chat_id, "stream": True}
    await _gone_before_first_byte(harness.app, "/v1/responses", body, spec)
    await _assert_completed(harness, chat_id)
    # The stored Response is completed too
    ddb, _ = harness.clients
    table = harness.context.settings.table_name
    items = ddb.scan(TableName=table)["Items"]
    statuses = [i["status"]["S"] for i in items if i["pk"]["S"].startswith("RESP#")]
    assert statuses == ["completed"], statuses
    after = await harness.client.post("/v1/responses", json={**body, "input": "and now?", "stream": False})
    assert after.status_code == 200 and after.json()["status"] == "completed", after.text
