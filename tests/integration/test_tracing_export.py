"""OTLP export as the standard variables configure it, in a process of its own (a tracer provider is global).

A real turn of the offline model runs in a subprocess; the OTLP/HTTP exporter posts its spans to a loopback
collector, decoded with the OTLP protobuf schema. Without AGENT_OTEL_ENABLED or an endpoint nothing is
configured and nothing is sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.distributions import REPO
from tests.support.loopback import Loopback, LoopbackServer

SCRIPT = """
import asyncio
from opentelemetry import trace
from agent_core.config import Settings
from agent_core.context import build_context
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.tracing import flush_traces

async def main():
    context = build_context(Settings())
    result = await run_blocking(context.deps, TurnRequest(user_id="u1", message="what time is it in Tokyo?"))
    await context.background.join()
    print(type(trace.get_tracer_provider()).__name__, [c.tool_name for c in result.tool_calls])

asyncio.run(main())
flush_traces()
"""


class Collector(Loopback):
    """A loopback OTLP/HTTP receiver keeping each request's path and body."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(LoopbackServer(("127.0.0.1", 0), Handler), "otlp-collector")


def _run(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_", "OPENAI_"))}
    env.update(
        {
            "PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}",
            "AGENT_STORAGE": "memory",
            "AGENT_LLM_PROVIDER": "offline",
            **extra,
        }
    )
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_an_otlp_endpoint_turns_export_on() -> None:
    with Collector() as collector:
        out = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.origin, "OTEL_SERVICE_NAME": "traced-agent"})
    assert out.startswith("TracerProvider ['time']")
    assert collector.received and {path for path, _ in collector.received} == {"/v1/traces"}
    names, services = [], set()
    for _, body in collector.received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            names += [span.name for scope in resource_spans.scope_spans for span in scope.spans]
    assert services == {"traced-agent"}
    assert "invoke_agent main-agent" in names and "execute_tool time" in names
    assert any(name.startswith("chat ") for name in names)


def test_tracing_is_off_by_default() -> None:
    with Collector() as collector:
        out = _run({})
    assert out.startswith("ProxyTracerProvider")  # no SDK configured: the API's no-op tracer
    assert collector.received == []


FIRST_REQUEST = """
import asyncio, httpx
from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.tracing import flush_traces

async def main():
    app = build_app(*routes.chat)  # as a Lambda function does: the context is built by the first request
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers={"X-User-Id": "u1"}) as client:
        headers = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        answer = await client.post("/api/v1/conversations", json={"title": "t"}, headers=headers)
    print(answer.status_code)

asyncio.run(main())
flush_traces()
"""


def test_a_functions_first_request_is_traced_and_continues_the_callers_trace() -> None:
    with Collector() as collector:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_", "OPENAI_"))}
        env.update(
            {
                "PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}",
                "AGENT_STORAGE": "memory",
                "AGENT_LLM_PROVIDER": "offline",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.origin,
            }
        )
        done = subprocess.run(
            [sys.executable, "-c", FIRST_REQUEST], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and done.stdout.strip().endswith("201"), done.stderr[-2000:]
    spans = [
        span
        for _, body in collector.received
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans
        for scope in resource_spans.scope_spans
        for span in scope.spans
    ]
    servers = [s for s in spans if s.kind == s.SPAN_KIND_SERVER]
    assert [s.name for s in servers] == ["POST /api/v1/conversations"], [s.name for s in spans]
    assert servers[0].trace_id.hex() == "4bf92f3577b34da6a3ce929d0e0e4736"
