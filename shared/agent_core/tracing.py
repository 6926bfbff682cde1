"""Traces by the OpenTelemetry GenAI semantic conventions (development status; names as of semconv 1.44).

Spans: `invoke_agent {agent}` per run, `chat {model}` per model call, `execute_tool {name}` per tool call,
`search_memory` per long-term memory search (the conventions' `retrieval` operation), and a producer span per
enqueued job whose context travels in the job message to the job's consumer span.
The request spans are FastAPI's own (it instruments itself with the global provider, `traceparent` included);
mcp traces its own protocol messages under the tool's span; openai is not instrumented: nothing is doubled.
Only `opentelemetry-api` is a runtime dependency: its
tracer is a no-op until an SDK is configured, which `configure_tracing` does when AGENT_OTEL_ENABLED or an
OTLP endpoint variable asks for it (the SDK and the OTLP exporter are the `otel` extra, imported only then).
Message contents go on spans only with AGENT_OTEL_CAPTURE_CONTENT.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, StatusCode

if TYPE_CHECKING:
    from agent_core.config import Settings
    from agent_core.domain.models import Usage
    from agent_core.llm.base import LlmClient, LlmDelta, LlmRequest

T = TypeVar("T")
R = TypeVar("R")

SCOPE = "agent_core"
SEMCONV_VERSION = "1.44.0"  # the GenAI conventions (development status) these spans follow
QUEUE_NAME = "agent-core.jobs"

# Our provider keys -> `gen_ai.provider.name` well-known values.
PROVIDER_NAMES = {"openai": "openai", "azure": "azure.ai.openai", "bedrock": "aws.bedrock", "offline": "agent_core"}

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
USER_ID = "user.id"
ERROR_TYPE = "error.type"
TOOL_STATUS = "agent_core.tool.status"
DATA_SOURCE_ID = "gen_ai.data_source.id"
TOP_K = "gen_ai.request.top_k"
RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
MEMORY_STORE = "long_term_memory"  # the data source a memory search reads: the user's memory records
TOOL_TYPES = {"backend": "function", "frontend": "function", "mcp": "extension"}

_tracer = trace.get_tracer(SCOPE, schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
_capture = {"content": False}
_configured: dict[str, Any] = {}


# ----- set-up -----


def tracing_requested(settings: Settings) -> bool:
    """AGENT_OTEL_ENABLED, or an OTLP endpoint in the standard variables, unless OTEL_SDK_DISABLED."""
    if settings.otel_sdk_disabled:
        return False
    endpoint = settings.otel_exporter_otlp_endpoint or settings.otel_exporter_otlp_traces_endpoint
    return settings.otel_enabled or bool(endpoint)


def configure_tracing(settings: Settings) -> bool:
    """Install the SDK's tracer provider with the OTLP/HTTP exporter once per process, when requested.

    The exporter reads OTEL_EXPORTER_OTLP_* itself. A provider someone else installed (the AWS Distro for
    OpenTelemetry's wrapper, a test's) is kept. Returns whether traces are on (the caller then wraps the
    model client); when off, the run, tool and job spans are the API's no-ops.
    """
    _capture["content"] = settings.otel_capture_content
    if not tracing_requested(settings):
        return False
    if "provider" in _configured or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    try:  # the `otel` extra (or the ADOT layer in Lambda)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        from agent_core.observability import logger

        logger.warning("tracing requested but the OpenTelemetry SDK is not installed (pip install agent-core[otel])")
        return False
    attributes = {"service.name": settings.otel_service_name or settings.service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured["provider"] = provider
    return True


def flush_traces() -> None:
    """Export the spans still buffered (a Lambda invocation's end: nothing runs once the process is frozen)."""
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush()


def exporting() -> bool:
    """Whether an SDK tracer provider is installed (the API's default proxy has nothing to flush)."""
    return getattr(trace.get_tracer_provider(), "force_flush", None) is not None


# ----- a span around an async stream -----


async def within(span: Span, events: AsyncIterator[T]) -> AsyncGenerator[T, None]:
    """`events`, each step run with `span` current (attached and detached around each step, so the context
    never leaks to the consumer between items, whatever task closes the stream)."""
    ctx = trace.set_span_in_context(span)
    try:
        while True:
            token = otel_context.attach(ctx)
            try:
                item = await anext(events)
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield item
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            token = otel_context.attach(ctx)
            try:
                await close()
            finally:
                otel_context.detach(token)


def _failed(span: Span, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit | asyncio.CancelledError):  # a consumer that left: not a failure
        return
    span.set_attribute(ERROR_TYPE, getattr(exc, "code", None) or type(exc).__qualname__)
    span.set_status(StatusCode.ERROR, str(exc)[:200])


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        INPUT_TOKENS: usage.prompt_tokens,
        OUTPUT_TOKENS: usage.completion_tokens,
        CACHE_READ_TOKENS: usage.cache_read_tokens,
        CACHE_CREATION_TOKENS: usage.cache_write_tokens,
    }


# ----- the run: invoke_agent -----


class _Runner(Protocol):
    """What the run span reads of the runner (runtime/loop.py's TurnRunner)."""

    turn: Any
    recorder: Any  # runtime/recorder.py's RunRecorder: the run's outcome and finish reason


def traced_run(method: Callable[[R], AsyncIterator[T]]) -> Callable[[R], AsyncIterator[T]]:
    """Decorates the runner's `events()`: the run's events within an `invoke_agent {agent}` span."""

    @functools.wraps(method)
    def events(runner: R) -> AsyncIterator[T]:
        return _run_events(runner, method(runner))

    return events


async def _run_events(runner: Any, events: AsyncIterator[T]) -> AsyncIterator[T]:
    turn, run = runner.turn, runner.turn.run
    attributes = {
        OPERATION: "invoke_agent",
        PROVIDER: PROVIDER_NAMES["offline"],  # the agent runs here; each chat span names the model's provider
        AGENT_NAME: turn.agent.key,
        AGENT_ID: f"{turn.agent.key}@{run.agent_version}" if run.agent_version else turn.agent.key,
        CONVERSATION_ID: run.chat_id,
        REQUEST_MODEL: run.model,
        USER_ID: run.user_id,
        "agent_core.run.id": run.run_id,
        "agent_core.request.id": run.request_id,
    }
    span = _tracer.start_span(f"invoke_agent {turn.agent.key}", kind=SpanKind.INTERNAL, attributes=attributes)
    try:
        # Closed with this generator: a consumer that leaves ends the run now, not when it is collected
        async with contextlib.aclosing(within(span, events)) as items:
            async for item in items:
                yield item
        span.set_attributes(_usage_attributes(runner.recorder.outcome.usage))
        span.set_attribute(FINISH_REASONS, [runner.recorder.finish_reason])
        status = str(getattr(run.status, "value", run.status))
        span.set_attribute("agent_core.run.status", status)
        if status == "failed":  # the run ended with run.error (its events end normally)
            span.set_attribute(ERROR_TYPE, run.error_code or "error")
            span.set_status(StatusCode.ERROR, run.error_message or "")
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        span.end()


# ----- model calls: chat -----


class TracedLlm:
    """The LlmClient port with a `chat {model}` span per call (one place for every provider and the fallback
    chain: the answering `provider:model` a fallback delta names is the response model)."""

    def __init__(self, inner: LlmClient, provider: str) -> None:
        self.inner = inner
        self.provider = provider

    def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        return _chat_events(self.inner, self.provider, request)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def traced_llm(inner: LlmClient, provider: str) -> LlmClient:
    return inner if isinstance(inner, TracedLlm) else TracedLlm(inner, provider)


def _messages(messages: list[dict[str, Any]]) -> str:
    """Chat messages as the conventions' `gen_ai.input.messages` (role + parts)."""
    out = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if content:
            parts.append({"type": "text", "content": content if isinstance(content, str) else json.dumps(content)})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
        if message.get("role") == "tool":
            parts = [{"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}]
        out.append({"role": message.get("role"), "parts": parts})
    return json.dumps(out, ensure_ascii=False, default=str)


async def _chat_events(inner: LlmClient, provider: str, request: LlmRequest) -> AsyncIterator[LlmDelta]:
    attributes: dict[str, Any] = {
        OPERATION: "chat",
        PROVIDER: PROVIDER_NAMES.get(provider, provider),
        REQUEST_MODEL: request.model,
        "agent_core.llm.purpose": request.purpose,
    }
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    content = _capture["content"]
    if content:
        attributes[INPUT_MESSAGES] = _messages(request.messages)
    span = _tracer.start_span(f"chat {request.model}", kind=SpanKind.CLIENT, attributes=attributes)
    response_model, usage, reasons, text = request.model, None, [], []
    try:
        async for delta in within(span, inner.stream(request)):
            if delta.model:  # `provider:model` of the model that answered (the fallback chain)
                answered_by, _, response_model = delta.model.partition(":")
                span.set_attribute(PROVIDER, PROVIDER_NAMES.get(answered_by, answered_by))
            if delta.usage is not None:
                usage = delta.usage
            if delta.finish_reason:
                reasons.append(delta.finish_reason)
            if content and delta.content:
                text.append(delta.content)
            yield delta
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        span.set_attribute(RESPONSE_MODEL, response_model)
        if usage is not None:
            span.set_attributes(_usage_attributes(usage))
        if reasons:
            span.set_attribute(FINISH_REASONS, reasons)
        if content:
            output = [{"role": "assistant", "parts": [{"type": "text", "content": "".join(text)}]}]
            span.set_attribute(OUTPUT_MESSAGES, json.dumps(output, ensure_ascii=False))
        span.end()


# ----- tool calls: execute_tool -----


@contextmanager
def tool_span(name: str, call_id: str, kind: str | None) -> Iterator[Span]:
    """An `execute_tool {name}` span; the caller records the outcome with `tool_outcome`."""
    attributes = {OPERATION: "execute_tool", TOOL_NAME: name, TOOL_CALL_ID: call_id}
    if kind is not None:
        attributes[TOOL_TYPE] = TOOL_TYPES.get(kind, kind)
    with _tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


def tool_outcome(span: Span, status: str, reason: str) -> None:
    span.set_attribute(TOOL_STATUS, status)
    if status != "ok":
        span.set_attribute(ERROR_TYPE, reason or status)
        span.set_status(StatusCode.ERROR, reason or status)


# ----- guardrail checks -----

GUARDRAIL_STAGE = "agent_core.guardrail.stage"
GUARDRAIL_ADAPTER = "agent_core.guardrail.adapter"
GUARDRAIL_OUTCOME = "agent_core.guardrail.outcome"
GUARDRAIL_FINDINGS = "agent_core.guardrail.findings"


@contextmanager
def guardrail_span(stage: str, adapter: str, chars: int) -> Iterator[Span]:
    """An `apply_guardrail {stage}` span per check; the caller records its outcome with `guardrail_outcome`.

    Only the stage, the adapter, the text's length and what was found (labels, never the matched text)."""
    attributes: dict[str, str | int] = {
        GUARDRAIL_STAGE: stage,
        GUARDRAIL_ADAPTER: adapter,
        "agent_core.guardrail.chars": chars,
    }
    with _tracer.start_as_current_span(
        f"apply_guardrail {stage}", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span


def guardrail_outcome(span: Span, outcome: str, labels: list[str]) -> None:
    span.set_attribute(GUARDRAIL_OUTCOME, outcome)
    span.set_attribute(GUARDRAIL_FINDINGS, labels)
    if outcome == "block":
        span.set_attribute(ERROR_TYPE, "guardrail_intervened")


# ----- long-term memory: search_memory -----


class MemorySearchSpan:
    """What `memory_span` hands its caller: record the search's result on it."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def searched(self, records: int) -> None:
        """How many records the search ranked (the user's index; 0: nothing to search, no embedding)."""
        self.span.set_attribute("agent_core.memory.records", records)

    def found(self, hits: list[tuple[str, float]], tokens: int) -> None:
        """The records returned (`(record id, score)`, best first) and their estimated tokens."""
        self.span.set_attribute("agent_core.memory.hits", len(hits))
        self.span.set_attribute("agent_core.memory.tokens", tokens)
        if _capture["content"]:
            documents = [{"id": record_id, "score": round(score, 6)} for record_id, score in hits]
            self.span.set_attribute(RETRIEVAL_DOCUMENTS, json.dumps(documents))


@contextmanager
def memory_span(user_id: str, query: str, limit: int) -> Iterator[MemorySearchSpan]:
    """A `search_memory` span around one search of a user's memory records (the recall before a turn's model
    call, the memory tools, the memory search route): the conventions' `retrieval` operation on the data
    source `long_term_memory`; the query's text only with content capture."""
    attributes: dict[str, Any] = {
        OPERATION: "retrieval",
        PROVIDER: PROVIDER_NAMES["offline"],  # the search runs here, on the user's records
        DATA_SOURCE_ID: MEMORY_STORE,
        TOP_K: float(limit),
        USER_ID: user_id,
        "agent_core.memory.query_length": len(query),
    }
    if _capture["content"]:
        attributes[RETRIEVAL_QUERY] = query
    with _tracer.start_as_current_span("search_memory", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield MemorySearchSpan(span)


# ----- jobs: the queue carries the trace -----


def _messaging(operation: str, kind: str) -> dict[str, str]:
    return {
        "messaging.operation.type": operation,
        "messaging.destination.name": QUEUE_NAME,
        "agent_core.job.kind": kind,
    }


def send_span(kind: str) -> dict[str, str]:
    """A producer span for one job sent to the queue; the carrier (`traceparent`, ...) the job message keeps."""
    attributes = {
        "messaging.operation.type": "send",
        "messaging.destination.name": QUEUE_NAME,
        "agent_core.job.kind": kind,
    }
    carrier: dict[str, str] = {}
    with _tracer.start_as_current_span(f"send {QUEUE_NAME}", kind=SpanKind.PRODUCER, attributes=attributes):
        propagate.inject(carrier)
    return carrier


@contextmanager
def job_span(kind: str, traceparent: str, tracestate: str = "") -> Iterator[Span]:
    """The consumer span a job runs in, a child of the span that sent it (its `traceparent`)."""
    carrier = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate else {})}
    parent = propagate.extract(carrier) if traceparent else None
    attributes = {
        "messaging.operation.type": "process",
        "messaging.destination.name": QUEUE_NAME,
        "agent_core.job.kind": kind,
    }
    with _tracer.start_as_current_span(
        f"process {QUEUE_NAME}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield span
