"""Resuming the UI wires' streams from the run's durable log, on another instance sharing the table.

Vercel AI SDK: `GET /api/ui-stream/{chatId}/stream` (useChat's `reconnectToStream`). AG-UI: the same
RunAgentInput (threadId, runId) posted again. Each run streams from instance A over real HTTP while the model
is held mid-answer by the test (no timing: the stub waits for an event the test sets); the resumes go to
instance B. The stream received before a cut joined to the resumed one is the uncut stream, byte for byte
(`id:` and `data:` lines), at every cut point.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event as AgUiEvent
from pydantic import TypeAdapter

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store import items as it
from agent_core.store.memory_table import MemoryTable
from agent_core.store.schema import PK, SK
from agent_core.store.table import Condition, Item, Key, Put, SkRange, Update, WriteOp
from agent_core.wires.client_turn import client_chat_id
from tests.support.approvals import RecordingTool
from tests.support.client_approvals import gate_writer
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.wait import apoll_until

ROOT = Path(__file__).resolve().parents[2]
RESUMER = ROOT / "tests" / "support" / "js" / "ui_resume_client.cjs"
ALICE = {"Authorization": "Bearer alice"}
AG_UI_EVENT: TypeAdapter[Any] = TypeAdapter(AgUiEvent)


def _context(table: MemoryTable, stub: OpenAiStub) -> AppContext:
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=stub.base_url,
        OPENAI_API_KEY="sk-t",
        AGENT_LLM_MAX_RETRIES="0",
    )
    return build_context(settings, table=table, llm=OpenAiLlmClient(settings), audit=lambda line: None)


@pytest.fixture
def stub() -> Iterator[OpenAiStub]:
    with OpenAiStub() as server:
        yield server


class LogTable(MemoryTable):
    """A memory table whose run-log writes (LOG# items) the test can make fail; it keeps each write call's
    (operation, sort keys) in `writes`."""

    fail_log = False

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, tuple[str, ...]]] = []

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        self.writes.append(("put", (str(item[SK]),)))
        if self.fail_log and str(item.get("sk", "")).startswith("LOG#"):
            raise RuntimeError("the table refused the write")
        await super().put(item, condition)

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        self.writes.append(("update", (str(key[SK]),)))
        return await super().update(key, update, condition)

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        self.writes.append(("delete", (str(key[SK]),)))
        await super().delete(key, condition)

    async def transact(self, ops: list[WriteOp]) -> None:
        self.writes.append(("transact", tuple(str(op.item[SK] if isinstance(op, Put) else op.key[SK]) for op in ops)))
        await super().transact(ops)


@pytest.fixture
def table() -> LogTable:
    return LogTable()


@pytest.fixture
def instances(stub: OpenAiStub, table: LogTable) -> Iterator[tuple[str, str]]:
    """Two app instances (two Lambda environments) over one table, each behind its own uvicorn."""
    first = build_app(*routes.local, context=_context(table, stub))
    second = build_app(*routes.local, context=_context(table, stub))
    with serve(first) as a, serve(second) as b:
        yield a, b


class Stream:
    """One streamed response read as it comes: its SSE messages (comments left out), each as its exact text."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.status = 0
        self.task: asyncio.Task[None] | None = None

    async def _read(self, client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> None:
        async with client.stream(method, url, **kwargs) as response:
            self.status = response.status_code
            buffer = ""
            async for text in response.aiter_text():
                buffer += text
                while "\n\n" in buffer:
                    message, buffer = buffer.split("\n\n", 1)
                    if message and not message.startswith(":"):
                        self.messages.append(message)

    def start(self, client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Stream:
        self.task = asyncio.create_task(self._read(client, method, url, **kwargs))
        return self

    async def done(self) -> list[str]:
        assert self.task is not None
        await asyncio.wait_for(self.task, 60)  # a bound for a hung test, never a timing assertion
        return self.messages

    async def until(self, text: str) -> None:
        await _until(lambda: any(text in m for m in self.messages), f"{text!r} streamed")


async def _until(check: Callable[[], Any], what: str) -> None:
    """Until `check()` holds (the event loop runs on meanwhile; bounded for a hung test)."""

    async def probe() -> Any:
        return check()

    await apoll_until(probe, what, bound_s=30)


def _id(message: str) -> str:
    first = message.split("\n", 1)[0]
    assert first.startswith("id: "), message
    return first.removeprefix("id: ")


def _data(message: str) -> str:
    return message.split("data: ", 1)[1]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=ALICE, timeout=60) as http:
        yield http


def _held_answer(stub: OpenAiStub, hold: threading.Event, *, tool: bool = True) -> None:
    """A server tool call (time), then reasoning and an answer the stub holds after "ten " until `hold`."""
    answer = StubScript.text("It is ", "ten ", "in Tokyo.", reasoning=["Look", "ing"])
    answer.before_chunk = lambda n: hold.wait(timeout=60) if n == 4 else None
    call = StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}])
    stub.enqueue(*([call] if tool else []), answer)


def _ui_body(chat_id: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat_id, "messages": [message], "trigger": "submit-message", **extra}


async def test_ui_stream_resumes_on_another_instance_byte_identical_at_every_cut(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    a, b = instances
    hold = threading.Event()
    _held_answer(stub, hold)
    # Given a UI stream from instance A, its model held mid-answer
    live = Stream().start(client, "POST", f"{a}/api/ui-stream", json=_ui_body("chat-r", "Tokyo time?"))
    await live.until('"delta":"ten "')
    seen = list(live.messages)
    assert json.loads(_data(seen[0]))["type"] == "start"
    # When the stream is resumed on instance B after each message received so far (and from the start)
    url = f"{b}/api/ui-stream/chat-r/stream"
    resumes = [Stream().start(client, "GET", url)]
    resumes += [Stream().start(client, "GET", url, headers={"Last-Event-ID": _id(m)}) for m in seen]
    await _until(lambda: all(r.status for r in resumes), "every resume answered")
    hold.set()
    whole = await live.done()
    # Then each is the rest of the uncut stream, byte for byte: nothing lost, nothing twice
    assert _data(whole[-1]) == "[DONE]" and '"type":"finish"' in _data(whole[-2])
    for cut, resume in enumerate(resumes):
        assert resume.status == 200
        assert seen[:cut] + await resume.done() == whole, f"cut after {cut} messages"
    ids = [_id(m) for m in whole]
    assert len(set(ids)) == len(ids) and ids[0] == "0.0"
    # And with the run over, nothing is going on in the chat: 204 (useChat stops resuming)
    over = await client.get(url)
    assert over.status_code == 204 and over.text == ""


async def test_ui_stream_resume_answers_owner_and_id_errors_before_streaming(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    a, b = instances
    hold = threading.Event()
    _held_answer(stub, hold, tool=False)
    live = Stream().start(client, "POST", f"{a}/api/ui-stream", json=_ui_body("chat-o", "hi"))
    await live.until('"delta":"ten "')
    try:
        # Another user's chat of the same client id is not theirs: 404, as is a chat never used
        foreign = await client.get(f"{b}/api/ui-stream/chat-o/stream", headers={"Authorization": "Bearer bob"})
        unknown = await client.get(f"{b}/api/ui-stream/never-used/stream")
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.json()["error"]["code"] == unknown.json()["error"]["code"] == "chat_not_found"
        # A Last-Event-ID that is not one of this stream's ids: 422, naming the header
        bad = await client.get(f"{b}/api/ui-stream/chat-o/stream", headers={"Last-Event-ID": "7"})
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "Last-Event-ID"
    finally:
        hold.set()
    await live.done()


async def test_a_client_tool_call_resumes_as_the_clients_own(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    # The client's tools are not stored: the resumed encoder learns them from the run's frontend tool calls
    a, b = instances
    hold = threading.Event()
    call = StubScript.tool_calls([{"id": "call_c", "name": "pick_color", "arguments": {"palette": "warm"}}])
    call.before_chunk = lambda n: hold.wait(timeout=60) if n == 2 else None
    stub.enqueue(call)
    tools = [{"name": "pick_color", "description": "Ask the user for a color", "parameters": {"type": "object"}}]
    body = _ui_body("chat-c", "pick a color", tools=tools)
    live = Stream().start(client, "POST", f"{a}/api/ui-stream", json=body)
    await live.until('"type":"tool-input-start"')
    resumed = Stream().start(client, "GET", f"{b}/api/ui-stream/chat-c/stream")
    await _until(lambda: resumed.status, "the resume answered")
    hold.set()
    whole = await live.done()
    assert await resumed.done() == whole
    start = json.loads(next(_data(m) for m in whole if "tool-input-start" in m))
    assert start["toolName"] == "pick_color" and "providerExecuted" not in start


async def test_a_log_that_stops_short_ends_the_resumed_stream_with_the_wires_error(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient, table: LogTable
) -> None:
    # Given a run whose log writes all fail (the live stream is whole: the log never delays or breaks it)
    a, b = instances
    table.fail_log = True
    hold = threading.Event()
    _held_answer(stub, hold, tool=False)
    live = Stream().start(client, "POST", f"{a}/api/ui-stream", json=_ui_body("chat-b", "hi"))
    await live.until('"delta":"ten "')
    # When a client resumes it while it runs
    resumed = Stream().start(client, "GET", f"{b}/api/ui-stream/chat-b/stream")
    await _until(lambda: resumed.status, "the resume answered")
    hold.set()
    assert _data((await live.done())[-1]) == "[DONE]"
    # Then the resumed stream cannot continue past what the log holds, and says so in the wire's own terms
    messages = [_data(m) for m in await resumed.done()]
    assert resumed.status == 200 and messages[-1] == "[DONE]"
    error = json.loads(messages[-2])
    assert error["type"] == "error" and error["errorText"].startswith("[resume_unavailable] ")


def _ag_ui_body(thread: str, run: str, text: str) -> dict[str, Any]:
    message = {"id": "m1", "role": "user", "content": text}
    return {"threadId": thread, "runId": run, "state": {}, "messages": [message], "tools": [], "context": []}


async def test_ag_ui_reconnect_continues_the_running_run_byte_identical_at_every_cut(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    a, b = instances
    hold = threading.Event()
    _held_answer(stub, hold)
    body = _ag_ui_body("thread-r", "run-1", "Tokyo time?")
    # Given an AG-UI run streaming from instance A, its model held mid-answer
    live = Stream().start(client, "POST", f"{a}/api/ag-ui", json=body)
    await live.until('"delta":"ten "')
    seen = list(live.messages)
    # When the client posts the same input again (same threadId and runId) to instance B, from the start and
    # after each event it got (Last-Event-ID)
    resumes = [Stream().start(client, "POST", f"{b}/api/ag-ui", json=body)]
    resumes += [
        Stream().start(client, "POST", f"{b}/api/ag-ui", json=body, headers={"Last-Event-ID": _id(m)}) for m in seen
    ]
    await _until(lambda: all(r.status for r in resumes), "every reconnect answered")
    # A new run on the thread (another runId) meanwhile is refused as before
    other = await client.post(f"{b}/api/ag-ui", json=_ag_ui_body("thread-r", "run-2", "again"))
    assert other.status_code == 409 and other.json()["error"]["code"] == "run_in_progress"
    hold.set()
    whole = await live.done()
    # Then each reconnect continues the run: the uncut stream, byte for byte, valid AG-UI events
    events = [AG_UI_EVENT.validate_json(_data(m)) for m in whole]
    assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
    assert (events[0].thread_id, events[0].run_id) == ("thread-r", "run-1")
    text = "".join(e.delta for e in events if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "It is ten in Tokyo."
    for cut, resume in enumerate(resumes):
        assert resume.status == 200
        assert seen[:cut] + await resume.done() == whole, f"cut after {cut} events"
    # And a reconnect once the run is over is 204 (nothing to continue), not a second run
    late = await client.post(f"{b}/api/ag-ui", json=body, headers={"Last-Event-ID": _id(whole[-1])})
    assert late.status_code == 204
    assert len(stub.requests) == 2  # the tool step and the answer: no reconnect ran the model


async def test_the_ai_sdk_reconnects_to_a_cut_stream_and_reads_the_whole_message(
    instances: tuple[str, str], stub: OpenAiStub, ai_modules: Path
) -> None:
    a, b = instances
    hold = threading.Event()
    _held_answer(stub, hold)
    # Given a UI stream cut mid-answer (the client went away; the run goes on)
    async with (
        httpx.AsyncClient(headers=ALICE, timeout=60) as first,
        first.stream("POST", f"{a}/api/ui-stream", json=_ui_body("chat-sdk", "Tokyo time?")) as response,
    ):
        async for text in response.aiter_text():
            if '"delta":"ten "' in text:
                break
    # When the AI SDK's own transport reconnects on instance B (useChat({resume: true}) on a reloaded page)
    command = ["node", str(RESUMER), str(ai_modules), f"{b}/api/ui-stream", "alice", "chat-sdk"]
    node = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert node.stdout is not None
    connected = await asyncio.wait_for(node.stdout.readline(), 60)
    assert connected.strip() == b"connected", connected
    hold.set()
    out, err = await asyncio.wait_for(node.communicate(), 60)
    result = json.loads(out)
    # Then it reads the whole message once: the tool part and the answer, each piece once
    assert node.returncode == 0, err.decode()
    types = [c["type"] for c in result["chunks"]]
    assert types.count("start") == 1 and types[-1] == "finish"
    parts = result["message"]["parts"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert texts == ["It is ten in Tokyo."]
    [call] = [p for p in parts if p["type"] == "dynamic-tool"]
    assert call["toolName"] == "time" and call["state"] == "output-available"
    # And once the run is over the SDK is told there is nothing to resume (null: 204)
    again = subprocess.run([*command, "--after"], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(again.stdout.splitlines()[-1]) == {"stream": None}


NOTE = {"path": "notes/today.md", "content": "buy milk"}


@pytest.fixture
def gated(stub: OpenAiStub, table: LogTable) -> Iterator[tuple[str, str, list[RecordingTool]]]:
    """Two instances over one table whose default agent's `write_note` needs approval (each its own tool)."""
    contexts = [_context(table, stub), _context(table, stub)]
    tools = [gate_writer(context, []) for context in contexts]
    with (
        serve(build_app(*routes.local, context=contexts[0])) as a,
        serve(build_app(*routes.local, context=contexts[1])) as b,
    ):
        yield a, b, tools


async def _assert_resumes_identical(
    live: Stream, resumes: list[Stream], seen: list[str], hold: threading.Event
) -> list[str]:
    await _until(lambda: all(r.status for r in resumes), "every resume answered")
    hold.set()
    whole = await live.done()
    for cut, resume in enumerate(resumes):
        assert resume.status == 200
        assert seen[:cut] + await resume.done() == whole, f"cut after {cut} messages"
    return whole


async def test_an_approval_continuation_on_the_ui_stream_resumes_byte_identical_at_every_cut(
    gated: tuple[str, str, list[RecordingTool]], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    a, b, tools = gated
    # Given a run that asked for an approval (the message's id and the request's id from its stream)
    stub.enqueue(StubScript.tool_calls([{"id": "call_n", "name": "write_note", "arguments": NOTE}]))
    asking = Stream().start(client, "POST", f"{a}/api/ui-stream", json=_ui_body("chat-ap", "Write my note"))
    asked = [json.loads(_data(m)) for m in (await asking.done())[:-1]]
    message_id = asked[0]["messageId"]
    [request] = [c for c in asked if c["type"] == "tool-approval-request"]
    # When the approval continues the message on instance A, the model held mid-answer
    hold = threading.Event()
    _held_answer(stub, hold, tool=False)
    part = {
        "type": "dynamic-tool",
        "toolName": "write_note",
        "toolCallId": "call_n",
        "state": "approval-responded",
        "input": NOTE,
        "approval": {"id": request["approvalId"], "approved": True},
    }
    answered = {"id": message_id, "role": "assistant", "parts": [part]}
    question = _ui_body("chat-ap", "Write my note")["messages"][0]
    body = {"id": "chat-ap", "messages": [question, answered], "trigger": "submit-message"}
    live = Stream().start(client, "POST", f"{a}/api/ui-stream", json=body)
    await live.until('"delta":"ten "')
    seen = list(live.messages)
    # And it is resumed on instance B from the start and after each message received so far
    url = f"{b}/api/ui-stream/chat-ap/stream"
    resumes = [Stream().start(client, "GET", url)]
    resumes += [Stream().start(client, "GET", url, headers={"Last-Event-ID": _id(m)}) for m in seen]
    # Then each joined to what came before the cut is the uncut continuation, byte for byte: the same message
    # goes on, the decided call's start is not sent again (only its output)
    whole = await _assert_resumes_identical(live, resumes, seen, hold)
    chunks = [json.loads(_data(m)) for m in whole[:-1]]
    assert chunks[0] == {"type": "start", "messageId": message_id}
    assert [c["type"] for c in chunks[1:2]] == ["tool-output-available"]
    assert not any(c["type"] == "tool-input-start" for c in chunks)
    assert [t.executions for t in tools] == [["call_n"], []]  # once, on the instance that ran it


async def test_an_approval_continuation_on_ag_ui_reconnects_byte_identical_at_every_cut(
    gated: tuple[str, str, list[RecordingTool]], stub: OpenAiStub, client: httpx.AsyncClient
) -> None:
    a, b, tools = gated
    approve_tool = {"name": "approve_tool_call", "description": "Ask to approve", "parameters": {"type": "object"}}
    # Given an AG-UI run that asked for an approval (a call of approve_tool_call)
    stub.enqueue(StubScript.tool_calls([{"id": "call_n", "name": "write_note", "arguments": NOTE}]))
    first = {**_ag_ui_body("thread-ap", "run-1", "Write my note"), "tools": [approve_tool]}
    asking = Stream().start(client, "POST", f"{a}/api/ag-ui", json=first)
    events = [AG_UI_EVENT.validate_json(_data(m)) for m in await asking.done()]
    starts = [e for e in events if e.type == "TOOL_CALL_START"]
    [approval_id] = [e.tool_call_id for e in starts if e.tool_call_name == "approve_tool_call"]
    # When its answer starts the next run on instance A, the model held mid-answer
    hold = threading.Event()
    _held_answer(stub, hold, tool=False)
    call = {"id": approval_id, "type": "function", "function": {"name": "approve_tool_call", "arguments": "{}"}}
    messages = [
        *first["messages"],
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": approval_id, "content": '{"approve": true}'},
    ]
    body = {**first, "runId": "run-2", "messages": messages}
    live = Stream().start(client, "POST", f"{a}/api/ag-ui", json=body)
    await live.until('"delta":"ten "')
    seen = list(live.messages)
    # And the client reconnects to instance B (the same body) from the start and after each event it got
    resumes = [Stream().start(client, "POST", f"{b}/api/ag-ui", json=body)]
    resumes += [
        Stream().start(client, "POST", f"{b}/api/ag-ui", json=body, headers={"Last-Event-ID": _id(m)}) for m in seen
    ]
    # Then each is the uncut run, byte for byte: the decided call's result, never its start again
    whole = await _assert_resumes_identical(live, resumes, seen, hold)
    kinds = [AG_UI_EVENT.validate_json(_data(m)).type for m in whole]
    assert kinds[:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"] and "TOOL_CALL_START" not in kinds
    assert [t.executions for t in tools] == [["call_n"], []]


ASIDE = ("LOG#", "USAGE", "BUDGET#")  # the event log's batches follow the stream's timing; the ledger is a job's


def _turn_writes(table: LogTable, since: int) -> list[tuple[str, tuple[str, ...]]]:
    """The table writes since `since`, the run's event log and usage ledger aside."""
    return [(op, keys) for op, keys in table.writes[since:] if not all(k.startswith(ASIDE) for k in keys)]


async def test_a_client_tool_call_costs_no_wait_item_write(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient, table: LogTable
) -> None:
    # The client answers its tool with its next request, never POST /api/ap/submit: nothing waits on a WAIT item
    a, _ = instances
    stub.enqueue(StubScript.text("Hello."))
    start = len(table.writes)
    assert await Stream().start(client, "POST", f"{a}/api/ui-stream", json=_ui_body("chat-w1", "hi")).done()
    plain = _turn_writes(table, start)
    call = StubScript.tool_calls([{"id": "call_c", "name": "pick_color", "arguments": {"palette": "warm"}}])
    stub.enqueue(call)
    tools = [{"name": "pick_color", "description": "Ask the user for a color", "parameters": {"type": "object"}}]
    start = len(table.writes)
    body = _ui_body("chat-w2", "pick a color", tools=tools)
    handed = await Stream().start(client, "POST", f"{a}/api/ui-stream", json=body).done()
    assert '"type":"tool-input-available"' in handed[-3] and '"finishReason":"tool-calls"' in handed[-2]
    client_turn = _turn_writes(table, start)
    # Then the turn writes what a plain turn writes (the chat, the turn's start, its end), no WAIT item
    assert not any(k.startswith("WAIT#") for _, keys in client_turn for k in keys), client_turn
    assert [op for op, _ in client_turn] == [op for op, _ in plain] == ["put", "transact", "transact"]


async def _drop_run_logs(table: LogTable, chat_id: str) -> None:
    """The event logs of the chat's runs deleted (as when their time to live is over)."""
    runs = await table.query(it.chat_pk(chat_id), SkRange(begins_with=it.RUN_PREFIX))
    for run in runs.items:
        logs = await table.query(it.run_pk(str(run["runId"])), SkRange(begins_with=it.LOG_PREFIX))
        for item in logs.items:
            await table.delete({PK: item[PK], SK: item[SK]})


async def test_ag_ui_repost_of_an_ended_run_gets_its_events_again_and_new_messages_start_another(
    instances: tuple[str, str], stub: OpenAiStub, client: httpx.AsyncClient, table: LogTable
) -> None:
    a, b = instances
    stub.enqueue(StubScript.text("It is ", "ten ", "in Tokyo."))
    body = _ag_ui_body("thread-e", "run-1", "Tokyo time?")
    # Given an AG-UI run that ended
    whole = await Stream().start(client, "POST", f"{a}/api/ag-ui", json=body).done()
    assert AG_UI_EVENT.validate_json(_data(whole[-1])).type == "RUN_FINISHED"
    asked = len(stub.requests)
    # When the client posts the same RunAgentInput again (same runId, no Last-Event-ID), on another instance
    again = Stream().start(client, "POST", f"{b}/api/ag-ui", json=body)
    # Then it gets that run's events again, byte for byte, from its log: no second run
    assert await again.done() == whole and again.status == 200 and len(stub.requests) == asked
    # With a Last-Event-ID it gets those after it; after the last one there is nothing left: 204
    cut = Stream().start(client, "POST", f"{b}/api/ag-ui", json=body, headers={"Last-Event-ID": _id(whole[2])})
    assert await cut.done() == whole[3:]
    late = await client.post(f"{b}/api/ag-ui", json=body, headers={"Last-Event-ID": _id(whole[-1])})
    assert late.status_code == 204
    # And once the run's log is gone, its stored replay stands in (from RUN_STARTED to RUN_FINISHED)
    await _drop_run_logs(table, client_chat_id("alice", "thread-e"))
    replayed = [
        AG_UI_EVENT.validate_json(_data(m))
        for m in await Stream().start(client, "POST", f"{b}/api/ag-ui", json=body).done()
    ]
    assert [replayed[0].type, replayed[-1].type] == ["RUN_STARTED", "RUN_FINISHED"]
    assert "".join(e.delta for e in replayed if e.type == "TEXT_MESSAGE_CONTENT") == "It is ten in Tokyo."
    assert len(stub.requests) == asked
    # When the same runId comes with a new message, that is another run
    stub.enqueue(StubScript.text("Nine in Paris."))
    answered = {"id": "a1", "role": "assistant", "content": "It is ten in Tokyo."}
    follow = {**body, "messages": [*body["messages"], answered, {"id": "m2", "role": "user", "content": "Paris?"}]}
    later = [
        AG_UI_EVENT.validate_json(_data(m))
        for m in await Stream().start(client, "POST", f"{b}/api/ag-ui", json=follow).done()
    ]
    assert "".join(e.delta for e in later if e.type == "TEXT_MESSAGE_CONTENT") == "Nine in Paris."
    assert len(stub.requests) == asked + 1
