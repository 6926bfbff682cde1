"""Traces by the OpenTelemetry GenAI conventions, read from the SDK's in-memory span exporter.

One scripted turn over HTTP (two tool calls, one of them a long-term memory search, then an answer) that also
enqueues a compaction job: every span carries the attributes its operation requires, the token counts add up
to the run's usage, and one trace links request -> run -> model calls / tools -> memory search and
request -> queue -> job (-> the job's model call).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agent_core import lambda_entry
from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import CompactJob, dump_job, parse_job
from agent_core.domain.memory import MemoryRecord, RecordKind
from agent_core.errors import LlmUnavailable
from agent_core.jobs.job_run import stamped
from agent_core.jobs.worker import process_batch
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import query
from tests.support.wait import poll_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
EXPORTER = InMemorySpanExporter()


class _Switched(SimpleSpanProcessor):
    """Exports only while a test of this module runs (a tracer provider, once set, stays for the process)."""

    on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)


SWITCH = _Switched(EXPORTER)
# What a Lambda function's provider holds: a batch processor, exporting on its own only every hour here.
BATCHED = InMemorySpanExporter()

# What each operation's span must carry (the conventions' required and conditionally required attributes
# that apply here, plus what this project promises: the conversation and the user on the run).
REQUIRED = {
    "invoke_agent": {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.agent.name",
        "gen_ai.conversation.id",
        "gen_ai.request.model",
        "user.id",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
    },
    "chat": {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.response.finish_reasons",
    },
    "execute_tool": {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "agent_core.tool.status"},
    # `search_memory`: the conventions' retrieval operation, plus what this project documents
    "retrieval": {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.data_source.id",
        "gen_ai.request.top_k",
        "user.id",
        "agent_core.memory.query_length",
        "agent_core.memory.records",
        "agent_core.memory.hits",
        "agent_core.memory.tokens",
    },
}
MEMORY_QUERY = "the Lisbon trip"


USAGE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (an SDK one, set once) exporting into EXPORTER, cleared for this test."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not getattr(provider, "_agent_core_test_exporter", False):
        provider.add_span_processor(SWITCH)
        provider.add_span_processor(BatchSpanProcessor(BATCHED, schedule_delay_millis=3_600_000))
        provider._agent_core_test_exporter = True  # type: ignore[attr-defined]
    EXPORTER.clear()
    BATCHED.clear()
    SWITCH.on = True
    yield EXPORTER
    SWITCH.on = False  # the other tests of this process record nothing
    EXPORTER.clear()


def _context(llm: ScriptedLlm, **settings: Any) -> AppContext:
    values = {"AGENT_OTEL_ENABLED": "true", **settings}  # keeps the provider the fixture installed
    return build_context(make_settings(**values), table=MemoryTable(), llm=llm, audit=lambda line: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.chat, context=context)
    headers = {"X-User-Id": "alice"}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers)


def _by_operation(spans: list[ReadableSpan], operation: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == operation]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    by_id = {s.context.span_id: s for s in spans}
    chain = []
    while (parent := by_id.get(_parent(span) or 0)) is not None:
        chain.append(parent)
        span = parent
    return chain


async def _scripted_turn(spans: InMemorySpanExporter, **settings: str) -> tuple[str, list[ReadableSpan], AppContext]:
    """Two earlier turns fill the window; the traced one runs two tools (the clock and a search of alice's
    long-term memory) and enqueues a compaction."""
    llm = ScriptedLlm()
    context = _context(llm, AGENT_MEMORY_WINDOW="2", AGENT_MEMORY_COMPACT_AFTER="4", **settings)
    assert context.deps.memory is not None
    remembered = [
        MemoryRecord(record_id=f"fact#{i}", user_id="alice", kind=RecordKind.FACT, text=text, at=1_700_000_000_000)
        for i, text in enumerate(["alice plans a trip to Lisbon in May", "alice plays the piano"])
    ]
    await context.deps.memory.add("alice", remembered)
    async with _client(context) as client:
        cid = (await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"]
        for i in range(2):
            await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": f"m{i}"})
            await context.background.join()
        spans.clear()
        llm.add(
            Reply(
                tool_calls=[
                    ("call_a", "time", {"timezone": "Europe/Paris"}),
                    ("call_b", "search_memory", {"query": MEMORY_QUERY}),
                ]
            ),
            Reply(text="done"),
        )
        response = await client.post(
            f"/api/v1/conversations/{cid}/chat", json={"message": "what time?"}, headers={"traceparent": TRACEPARENT}
        )
        await context.background.join()
    assert response.status_code == 200, response.text
    assert response.json()["assistantMessage"] == "done"
    return cid, list(spans.get_finished_spans()), context


async def test_a_turn_with_two_tools_and_a_job_is_one_linked_trace(spans: InMemorySpanExporter) -> None:
    cid, finished, _ = await _scripted_turn(spans)
    assert {format(s.context.trace_id, "032x") for s in finished} == {TRACE_ID}

    # FastAPI's own request span (its built-in instrumentation: this project adds none of its own)
    [request] = [s for s in finished if s.kind == SpanKind.SERVER]
    assert request.name == "POST /api/v1/conversations/{conversation_id}/chat"
    assert _parent(request) == int(PARENT_ID, 16)  # the caller's traceparent continues
    assert request.attributes["http.response.status_code"] == 200

    [run] = _by_operation(finished, "invoke_agent")
    assert run.name == "invoke_agent main-agent" and request in _ancestors(run, finished)
    assert run.attributes["gen_ai.conversation.id"] == cid
    assert run.attributes["user.id"] == "alice"

    tools = _by_operation(finished, "execute_tool")
    assert sorted((t.name, t.attributes["gen_ai.tool.call.id"]) for t in tools) == [
        ("execute_tool search_memory", "call_b"),
        ("execute_tool time", "call_a"),
    ]
    assert all(_parent(t) == run.context.span_id for t in tools)
    assert {t.attributes["agent_core.tool.status"] for t in tools} == {"ok"}

    # request -> run -> the search_memory tool -> its memory search; the recall before the model call (the
    # turn's preparation, before the run's span starts) is a search of its own, a child of the request
    [memory_tool] = [t for t in tools if t.attributes["gen_ai.tool.name"] == "search_memory"]
    searches = _by_operation(finished, "retrieval")
    assert all(s.name == "search_memory" for s in searches)
    [searched] = [s for s in searches if _parent(s) == memory_tool.context.span_id]
    [recalled] = [s for s in searches if s is not searched]
    assert _ancestors(searched, finished)[:2] == [memory_tool, run] and request in _ancestors(run, finished)
    assert request in _ancestors(recalled, finished) and run not in _ancestors(recalled, finished)
    assert searched.attributes["gen_ai.data_source.id"] == "long_term_memory"
    assert searched.attributes["agent_core.memory.query_length"] == len(MEMORY_QUERY)
    assert searched.attributes["agent_core.memory.records"] == 2 and searched.attributes["agent_core.memory.hits"] >= 1
    assert recalled.attributes["agent_core.memory.query_length"] == len("what time?")
    assert "gen_ai.retrieval.query.text" not in searched.attributes  # contents only when opted in

    chats = _by_operation(finished, "chat")
    turn_chats = [c for c in chats if _parent(c) == run.context.span_id]
    assert len(turn_chats) == 2
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in turn_chats] == [("tool_calls",), ("stop",)]
    for chat in turn_chats:  # the scripted model reports its usage (the summary call reports none)
        assert set(USAGE) <= set(chat.attributes), chat.name
    assert all(c.name == f"chat {c.attributes['gen_ai.request.model']}" for c in chats)
    assert all(c.attributes["gen_ai.provider.name"] == "agent_core" for c in chats)  # the offline setting

    # request -> queue -> job -> the job's model call. The run also queues its usage ledger write (a job of
    # its own, after the answer): linked the same way, and it calls no model.
    sends = {s.attributes["agent_core.job.kind"]: s for s in finished if s.kind == SpanKind.PRODUCER}
    jobs = {s.attributes["agent_core.job.kind"]: s for s in finished if s.kind == SpanKind.CONSUMER}
    assert sorted(sends) == sorted(jobs) == ["compact", "usage"]
    for kind, job in jobs.items():
        assert request in _ancestors(sends[kind], finished) and _parent(job) == sends[kind].context.span_id, kind
    job = jobs["compact"]
    assert not [c for c in chats if _parent(c) == jobs["usage"].context.span_id]
    [summary_call] = [c for c in chats if _parent(c) == job.context.span_id]
    assert summary_call.attributes["agent_core.llm.purpose"] == "summarize"

    for span in finished:
        operation = (span.attributes or {}).get("gen_ai.operation.name")
        if operation is not None:
            missing = REQUIRED[str(operation)] - set(span.attributes or {})
            assert not missing, f"{span.name} lacks {sorted(missing)}"
        assert span.status.status_code != StatusCode.ERROR, span.name


async def test_token_counts_equal_the_runs_usage(spans: InMemorySpanExporter) -> None:
    cid, finished, context = await _scripted_turn(spans)
    [span] = _by_operation(finished, "invoke_agent")
    turn_chats = [c for c in _by_operation(finished, "chat") if _parent(c) == span.context.span_id]
    run = await context.deps.turns.get_run(cid, str(span.attributes["agent_core.run.id"]))
    assert run is not None
    usage = {"input_tokens": run.usage.prompt_tokens, "output_tokens": run.usage.completion_tokens}
    assert usage == {"input_tokens": 20, "output_tokens": 10}  # two scripted model calls, 10 + 5 each
    usage["cache_read.input_tokens"] = run.usage.cache_read_tokens
    for name, value in usage.items():
        key = f"gen_ai.usage.{name}"
        assert span.attributes[key] == value
        assert sum(int(c.attributes[key]) for c in turn_chats) == value


async def test_message_contents_only_when_opted_in(spans: InMemorySpanExporter) -> None:
    _, finished, _ = await _scripted_turn(spans)
    assert not [s for s in finished if "gen_ai.input.messages" in (s.attributes or {})]
    _, finished, _ = await _scripted_turn(spans, AGENT_OTEL_CAPTURE_CONTENT="true")
    [run] = _by_operation(finished, "invoke_agent")
    last = [c for c in _by_operation(finished, "chat") if _parent(c) == run.context.span_id][-1]
    sent = json.loads(str(last.attributes["gen_ai.input.messages"]))
    assert {"type": "tool_call_response", "id": "call_b", "response": sent[-1]["parts"][0]["response"]} in sent[-1][
        "parts"
    ]
    assert json.loads(str(last.attributes["gen_ai.output.messages"]))[0]["parts"][0]["content"] == "done"
    searched = [
        s for s in _by_operation(finished, "retrieval") if s.attributes["gen_ai.retrieval.query.text"] == MEMORY_QUERY
    ]
    [document, *_] = json.loads(str(searched[0].attributes["gen_ai.retrieval.documents"]))
    assert document["id"] == "fact#0" and document["score"] > 0


async def test_an_sqs_message_carries_the_trace_to_the_worker(spans: InMemorySpanExporter) -> None:
    llm = ScriptedLlm()
    context = _context(llm)
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        body = dump_job(stamped(CompactJob(chat_id="c_missing", model="m")))
    assert json.loads(body)["traceparent"].split("-")[1] == format(request.get_span_context().trace_id, "032x")
    assert parse_job(body).traceparent  # the worker reads it back
    event = {"Records": [{"messageId": "1", "body": body, "attributes": {}, "eventSource": "aws:sqs"}]}
    assert await process_batch(event, context.jobs) == {"batchItemFailures": []}
    finished = spans.get_finished_spans()
    [send] = [s for s in finished if s.kind == SpanKind.PRODUCER]
    [job] = [s for s in finished if s.kind == SpanKind.CONSUMER]
    assert _parent(send) == request.get_span_context().span_id
    assert _parent(job) == send.context.span_id and job.context.trace_id == request.get_span_context().trace_id


def test_a_streamed_turn_through_the_openai_adapter_is_one_trace(
    spans: InMemorySpanExporter, openai_stub: OpenAiStub
) -> None:
    """Over real HTTP and SSE, with the openai SDK against the loopback stub: the stream's consumer and the run
    are different frames, and the spans still nest (each step of the run runs with the run's span current)."""
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=openai_stub.base_url,
        OPENAI_API_KEY="sk-t",
        AGENT_OTEL_ENABLED="true",
    )
    context = build_context(settings, table=MemoryTable(), audit=lambda line: None)
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_a", "name": "time", "arguments": {"timezone": "Asia/Shanghai"}},
                {"id": "call_b", "name": "time", "arguments": {"timezone": "Europe/Paris"}},
            ]
        ),
        StubScript.text("Both ", "times."),
    )
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "bob"}, timeout=30) as client,
    ):
        events = query(client, {"message": "two zones"}, traceparent=TRACEPARENT)
        finished = poll_until(
            lambda: [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER] and spans.get_finished_spans(),
            "the request span ended",
        )
    assert {format(s.context.trace_id, "032x") for s in finished} == {TRACE_ID}
    [request] = [s for s in finished if s.kind == SpanKind.SERVER]
    [run] = _by_operation(finished, "invoke_agent")
    assert request in _ancestors(run, finished) and run.attributes["user.id"] == "bob"
    assert run.attributes["gen_ai.conversation.id"] == events[0]["chatId"]
    tools = _by_operation(finished, "execute_tool")
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == ["call_a", "call_b"]
    chats = _by_operation(finished, "chat")
    assert all(_parent(s) == run.context.span_id for s in [*tools, *chats]) and len(chats) == 2
    assert {c.attributes["gen_ai.provider.name"] for c in chats} == {"openai"}
    [complete] = [e for e in events if e["type"] == "run.complete"]
    usage = {"input_tokens": complete["usage"]["promptTokens"], "output_tokens": complete["usage"]["completionTokens"]}
    assert usage == {"input_tokens": 20 + 11, "output_tokens": 9 + 7}  # the stub's two answers
    for name, value in usage.items():
        assert run.attributes[f"gen_ai.usage.{name}"] == value
        assert sum(int(c.attributes[f"gen_ai.usage.{name}"]) for c in chats) == value


def test_a_lambda_invocation_exports_its_spans_before_it_returns(spans: InMemorySpanExporter) -> None:
    """Nothing runs once a Lambda invocation returns: the worker's entry flushes the batch processor."""
    context = _context(ScriptedLlm())
    body = dump_job(stamped(CompactJob(chat_id="c_missing", model="m")))
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]  # earlier tests' spans
    BATCHED.clear()
    event = {"Records": [{"messageId": "1", "body": body, "attributes": {}, "eventSource": "aws:sqs"}]}
    lambda_entry.use(context)
    try:
        assert lambda_entry.handle_sqs(event) == {"batchItemFailures": []}
    finally:
        lambda_entry.use(None)
    assert [s.name for s in BATCHED.get_finished_spans() if s.kind == SpanKind.CONSUMER] == ["process agent-core.jobs"]


async def test_a_failed_model_call_marks_its_span_and_the_run(spans: InMemorySpanExporter) -> None:
    llm = ScriptedLlm(Reply(error=LlmUnavailable("LLM request failed: 500 after 3 retries")))
    async with _client(_context(llm)) as client:
        cid = (await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "hello"})
    assert response.status_code == 502
    finished = spans.get_finished_spans()
    [run], [chat] = _by_operation(finished, "invoke_agent"), _by_operation(finished, "chat")
    for span in (run, chat):
        assert span.status.status_code == StatusCode.ERROR and span.attributes["error.type"] == "llm_unavailable"
    assert run.attributes["agent_core.run.status"] == "failed"


async def test_each_guardrail_check_is_a_span_naming_what_it_found_never_the_text(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    (tmp_path / "guarded.yaml").write_text(
        "key: main-agent\nname: Guarded\nmode: direct\nguardrails:\n  input: mask\n  output: block\n", encoding="utf-8"
    )
    llm = ScriptedLlm(Reply(text="reach dana.ross@example.com"))
    async with _client(_context(llm, AGENT_DEFINITIONS_DIR=str(tmp_path))) as client:
        cid = (await client.post("/api/v1/conversations", json={"title": "t"})).json()["conversationId"]
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "I am 4111 1111 1111 1111"})
    assert response.status_code == 400
    finished = spans.get_finished_spans()
    checks = {s.name: s for s in finished if s.name.startswith("apply_guardrail")}
    assert set(checks) == {"apply_guardrail input", "apply_guardrail output"}
    given, answer = checks["apply_guardrail input"].attributes, checks["apply_guardrail output"].attributes
    assert given["agent_core.guardrail.outcome"] == "mask" and given["agent_core.guardrail.findings"] == ("CARD",)
    assert answer["agent_core.guardrail.outcome"] == "block" and answer["error.type"] == "guardrail_intervened"
    assert answer["agent_core.guardrail.adapter"] == "builtin"
    [run] = _by_operation(finished, "invoke_agent")
    assert checks["apply_guardrail output"].parent.span_id == run.context.span_id  # type: ignore[union-attr]
    assert "dana" not in json.dumps([dict(s.attributes or {}) for s in finished])


async def test_the_stream_function_exports_a_runs_spans_before_its_response_ends(spans: InMemorySpanExporter) -> None:
    """Behind the Web Adapter no handler returns, so nothing else flushes: the stream's end does, before the process
    may be frozen (the batch processor here would export on its own only after an hour)."""
    lambda_stream = {"AWS_LAMBDA_FUNCTION_NAME": "agent-core-stream", "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"}
    context = _context(ScriptedLlm(Reply(text="hi")), **lambda_stream)
    assert context.settings.behind_web_adapter
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]  # earlier tests' spans
    BATCHED.clear()
    app = build_app(*routes.stream_routes, context=context)
    transport = httpx.ASGITransport(app=app)
    headers = {"X-User-Id": "alice"}
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client,
        client.stream("POST", "/api/ap/query", json={"message": "hello"}) as response,
    ):
        body = [line async for line in response.aiter_lines()]
        # Read to its last event: the run's spans were exported before the body ended
        assert any('"run.complete"' in line for line in body)
        exported = {s.name for s in BATCHED.get_finished_spans()}
    # the run, its model call and memory search, its usage record's job (the request's own span ends after)
    expected = {"invoke_agent main-agent", "chat gpt-4.1-mini", "search_memory", "process agent-core.jobs"}
    assert expected <= exported, exported
