"""LLM faults through the loopback stub, on the streaming and the blocking route, with the same invariants
as the storage faults: what the client sees, the user message stored once, no partial answer stored as
complete, replay consistent, the next turn accepted at once."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from agent_core.domain.models import Role
from tests.faults.harness import Harness, build_harness, check_turn
from tests.support.openai_stub import Chunk, OpenAiStub, StubScript

QUESTION = "tell me everything"
ONE_MB = "".join(f"{i:07d} a long streamed answer line\n" for i in range(29_000))  # ~1 MB
HANG = threading.Event()  # never set while a test runs: the model stalls after its first chunk


def _cut() -> StubScript:
    script = StubScript.text("half an ", "answer that ", "never ends")
    script.abort_after = 2  # the connection drops mid-stream
    return script


def _no_finish(done: bool) -> StubScript:
    # Content, then the body ends: no finish_reason, with or without `data: [DONE]`
    return StubScript(chunks=[Chunk(content="looks "), Chunk(content="complete")], done=done)


def _garbled() -> StubScript:
    script = StubScript.text("some ", "text ", "then garbage")
    script.garble_at = 2
    return script


def _hang() -> StubScript:
    return StubScript.text("thinking", " forever", gate=HANG)


@dataclass(frozen=True)
class Case:
    scripts: Callable[[], list[StubScript]]
    stream: str  # the stream's terminal: run.complete or run.error <code>
    blocking: int  # the blocking route's status
    answer: str = ""  # the stored answer when complete
    code: str = ""  # the blocking route's error code


CASES = {
    "429_retry_after_short": Case(
        lambda: [StubScript.error(429, retry_after=0.001), StubScript.text("after ", "waiting")],
        "run.complete",
        200,
        "after waiting",
    ),
    "429_retry_after_long": Case(
        lambda: [StubScript.error(429, retry_after=3600)], "run.error llm_unavailable", 502, code="llm_unavailable"
    ),
    "5xx": Case(
        lambda: [StubScript.error(500) for _ in range(4)], "run.error llm_unavailable", 502, code="llm_unavailable"
    ),
    "hang": Case(lambda: [_hang()], "run.error deadline_exceeded", 504, code="deadline_exceeded"),
    "cut_mid_stream": Case(lambda: [_cut()], "run.error llm_unavailable", 502, code="llm_unavailable"),
    "no_finish_reason_no_done": Case(
        lambda: [_no_finish(done=False)], "run.error llm_unavailable", 502, code="llm_unavailable"
    ),
    "no_finish_reason_with_done": Case(
        lambda: [_no_finish(done=True)], "run.error llm_unavailable", 502, code="llm_unavailable"
    ),
    "garbled_chunk": Case(lambda: [_garbled()], "run.error llm_unavailable", 502, code="llm_unavailable"),
    "invalid_tool_call_json": Case(
        lambda: [
            StubScript.tool_calls([{"id": "c1", "name": "time", "arguments": '{"timezone": "Asia/To'}]),
            StubScript.text("the call was invalid"),
        ],
        "run.complete",
        200,
        "the call was invalid",
    ),
    "unknown_tool": Case(
        lambda: [
            StubScript.tool_calls([{"id": "c1", "name": "no_such_tool", "arguments": "{}"}]),
            StubScript.text("no such tool"),
        ],
        "run.complete",
        200,
        "no such tool",
    ),
    "1mb_answer": Case(
        lambda: [StubScript.text(*[ONE_MB[i : i + 64_000] for i in range(0, len(ONE_MB), 64_000)])],
        "run.complete",
        200,
        ONE_MB,
    ),
}


@pytest.fixture
async def llm_harness(aws_env: None, openai_stub: OpenAiStub, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    # A hung model meets a short deadline; every other case runs with the default deadlines.
    name = request.node.callspec.params["name"]
    deadlines = {"AGENT_STREAM_DEADLINE_MS": "500", "AGENT_TURN_DEADLINE_MS": "500"} if name == "hang" else {}
    h = build_harness(openai_stub, **deadlines)
    try:
        async with h.client:
            yield h
    finally:
        HANG.set()  # release the stub's stalled handler thread
        HANG.clear()


def _unqueue_a_hang_never_reached(h: Harness, name: str) -> None:
    """A deadline that passed before the request reached the stub (a loaded machine) leaves the hang queued:
    the follow-up turns must get the stub's normal reply, not a stall."""
    if name == "hang":
        h.stub.discard_pending()


@pytest.mark.parametrize("name", list(CASES))
async def test_llm_fault_on_the_stream(llm_harness: Harness, name: str) -> None:
    case = CASES[name]
    chat_id = await llm_harness.new_chat()
    llm_harness.stub.enqueue(*case.scripts())
    seen = await llm_harness.query(chat_id, QUESTION, f"req-{name}")
    _unqueue_a_hang_never_reached(llm_harness, name)
    outcome = await check_turn(llm_harness, chat_id, QUESTION, case.answer, seen)
    assert outcome == case.stream
    if case.stream == "run.complete":
        assert seen.text().endswith(case.answer)


@pytest.mark.parametrize("name", list(CASES))
async def test_llm_fault_on_the_blocking_route(llm_harness: Harness, name: str) -> None:
    case = CASES[name]
    chat_id = await llm_harness.new_chat()
    llm_harness.stub.enqueue(*case.scripts())
    response = await llm_harness.chat(chat_id, QUESTION)
    _unqueue_a_hang_never_reached(llm_harness, name)
    # Never a 200 for an outage: an error status with a stable code
    assert response.status_code == case.blocking, response.text
    if case.blocking == 200:
        assert response.json()["assistantMessage"] == case.answer
    else:
        assert response.json()["error"]["code"] == case.code
    messages = await llm_harness.store.messages_between(chat_id, None, None)
    assert [m.content for m in messages if m.role == Role.USER] == [QUESTION]
    answers = [m.content for m in messages if m.role == Role.ASSISTANT and not m.tool_calls]
    assert answers == ([case.answer] if case.blocking == 200 else [])
    after = await llm_harness.chat(chat_id, "and now?")
    assert after.status_code == 200 and after.json()["assistantMessage"] == "stub reply"
