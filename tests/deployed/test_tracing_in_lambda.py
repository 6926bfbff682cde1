"""Traces from the stream function as deployed, the in-process way (docs/operations.md "Traces"): `run.sh` behind
the Lambda Web Adapter, whose `AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap` leaves no room for ADOT's wrapper.

A layer holding the OpenTelemetry SDK and the OTLP/HTTP exporter (what an ADOT layer's packages or the `otel`
extra provide; pip-installed once for the runtime's Python into .build/deployed) is put first on the function's
path, `AGENT_OTEL_ENABLED` and `OTEL_EXPORTER_OTLP_ENDPOINT` point the exporter at a loopback collector (in
Lambda: a collector extension on localhost:4318). One streamed turn, sent with a `traceparent`, arrives there as
one trace: the request's server span, the run, its model call; the run's spans before the stream's last byte.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.integration.test_tracing_export import Collector
from tests.support.deployed.build import BUILD_DIR
from tests.support.deployed.functions import FunctionProcess
from tests.support.deployed.stack import DEFAULT_VARIANT, DeployedStack
from tests.support.lambda_events import http_v2_event
from tests.support.openai_stub import StubScript
from tests.support.wait import poll_until

OTEL_PACKAGES = ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def otel_layer(stack: DeployedStack) -> Path:
    """The SDK and the OTLP/HTTP exporter for the runtime's Python, as a layer's `python/` directory."""
    target = BUILD_DIR / "otel-layer" / "python"
    complete = target.parent / ".complete"
    if not complete.exists():
        shutil.rmtree(target.parent, ignore_errors=True)
        pip = [str(stack.runtime.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        done = subprocess.run([*pip, "--target", str(target), *OTEL_PACKAGES], capture_output=True, timeout=600)
        if done.returncode != 0:  # as the AI SDK's tests do without npm: the package index is needed once
            pytest.skip(f"could not install {' '.join(OTEL_PACKAGES)} for the runtime: {done.stderr[-300:]!r}")
        complete.write_text("ok\n")
    return target


def _spans(collector: Collector) -> list[tuple[Span, str]]:
    """Every span received, with its resource's service.name."""
    found = []
    for _, body in collector.received:
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            found += [(span, service) for scope in resource_spans.scope_spans for span in scope.spans]
    return found


def _attributes(span: Span) -> dict[str, Any]:
    return {a.key: a.value.string_value or a.value.int_value for a in span.attributes}


def test_the_stream_function_exports_a_turn_in_process_behind_the_web_adapter(
    stack: DeployedStack, otel_layer: Path
) -> None:
    synthesis = stack.variants[DEFAULT_VARIANT]
    definition = stack.definition("stream")
    assert definition.variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"  # the adapter's: ADOT's cannot be
    layers = [synthesis.asset_path(ref["Ref"]) / "python" for ref in definition.properties["Layers"] if "Ref" in ref]
    with Collector() as collector:
        tracing = {
            "AGENT_OTEL_ENABLED": "true",
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.origin,
            "OTEL_SERVICE_NAME": "agent-core-stream",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "PYTHONPATH": ":".join(str(d) for d in [otel_layer, *layers]),  # the SDK's layer first
        }
        process = FunctionProcess(definition, synthesis, stack.account, stack.runtime, stack.log_dir, tracing)
        try:
            process.wait_ready()
            stack.llm.enqueue(StubScript.text("Traced ", "answer."))
            headers = {"x-user-id": "dave", "traceparent": TRACEPARENT}
            response = process.invoke_streaming(http_v2_event("POST", "/api/ap/query", {"message": "hello"}, headers))
            events = list(response.sse_events())
            assert events[-1]["type"] == "run.complete", events[-1]
            # The run's spans left before the stream ended (its end flushes); the request span with the next batch
            run_spans = [s.name for s, _ in _spans(collector)]
            assert "invoke_agent main-agent" in run_spans, process.log_tail()
            spans = poll_until(
                lambda: (
                    (found := _spans(collector))
                    and any(s.kind == Span.SPAN_KIND_SERVER and s.trace_id.hex() == TRACE_ID for s, _ in found)
                    and found
                ),
                "the request's server span exported",
            )
        finally:
            process.stop()
    assert {service for _, service in spans} == {"agent-core-stream"}
    others = sorted({s.name for s, _ in spans if s.trace_id.hex() != TRACE_ID})
    assert others == ["GET"], others  # the adapter's readiness check at init (GET /, no route): its own trace
    spans = [(s, service) for s, service in spans if s.trace_id.hex() == TRACE_ID]  # the caller's trace continues
    by_name = {s.name: s for s, _ in spans}
    run = by_name["invoke_agent main-agent"]
    assert _attributes(run)["user.id"] == "dave"
    assert _attributes(run)["gen_ai.conversation.id"] == events[0]["chatId"]
    chats = [s for s, _ in spans if s.name.startswith("chat ") and s.parent_span_id == run.span_id]
    assert chats and _attributes(chats[0])["gen_ai.provider.name"] == "openai"
    [server] = [s for s, _ in spans if s.kind == Span.SPAN_KIND_SERVER]
    assert server.parent_span_id.hex() == TRACEPARENT.split("-")[2]
