"""The stream, submit and data functions' entry points with real event shapes, on moto."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from agent_core.observability import tracer
from tests.support.lambda_events import FakeLambdaContext, http_v2_event, rest_v1_event
from tests.support.server import serve
from tests.support.sse import query


def _fresh(module: Any) -> Any:
    """The module's handler with a new app context, and an event loop for Mangum on this thread.

    Mangum sets one up when the module is imported (a Lambda process's init); a test that runs after an
    asyncio test (whose runner leaves the thread without a loop) would otherwise find none.
    """
    module._asgi.app.state.context = None
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    return module.handler


def test_stream_app_serves_a_query_then_submit_and_data_handlers_answer(lambda_env: None) -> None:
    from functions.data import handler as data_module
    from functions.stream import app as stream_module
    from functions.submit import handler as submit_module

    stream_module.app.state.context = None
    with serve(stream_module.app) as base, httpx.Client(base_url=base, headers={"X-User-Id": "u1"}, timeout=30) as c:
        events = query(c, {"message": "what time is it?"})
    assert events[-1]["type"] == "run.complete"
    run_id, chat_id = events[0]["runId"], events[0]["chatId"]
    ctx = FakeLambdaContext()
    submit = _fresh(submit_module)
    body = {"runId": run_id, "toolId": "nope", "params": {}}
    answer = submit(http_v2_event("POST", "/api/ap/submit", body, {"x-user-id": "u1"}), ctx)
    assert answer["statusCode"] == 200 and json.loads(answer["body"]) == {"accepted": False, "status": "completed"}
    malformed = submit(rest_v1_event("POST", "/api/ap/submit", {"runId": run_id}, {"X-User-Id": "u1"}), ctx)
    assert malformed["statusCode"] == 422
    boto3.client("s3").put_object(
        Bucket="agent-core-test-data", Key=f"data/{chat_id}/a.csv", Body=b"x,y\n1,2\n", ContentType="text/csv"
    )
    data = _fresh(data_module)
    owner = data(rest_v1_event("GET", "/api/ap/data", None, {"X-User-Id": "u1"}, {"file": f"{chat_id}/a.csv"}), ctx)
    assert owner["statusCode"] == 200 and owner["body"] == "x,y\n1,2\n"
    assert owner["headers"]["content-type"].startswith("text/csv")
    stranger = data(http_v2_event("GET", "/api/ap/data", None, {"x-user-id": "u2"}, f"file={chat_id}/a.csv"), ctx)
    assert stranger["statusCode"] == 404
    traversal = data(http_v2_event("GET", "/api/ap/data", None, {}, "file=..%2f..%2fetc%2fpasswd"), ctx)
    assert traversal["statusCode"] == 400


def test_submit_and_data_import_neither_openai_nor_mcp() -> None:
    code = (
        "import sys, functions.submit.handler, functions.data.handler;"
        "print([m for m in ('openai', 'mcp') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_chat_function_loads_no_wire() -> None:
    """The wires (Responses, Chat Completions, AG-UI, UI stream, their encoders and execution) are the stream
    function's; the composition root builds the ResponseStore (a store module) for every function."""
    code = (
        "import sys, functions.chat.handler;"
        "print(sorted(m for m in sys.modules if m.startswith(('agent_core.wires', 'agent_core.store.responses'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['agent_core.store.responses']"


class _Subsegment:
    def __init__(self, name: str, recorder: _XRay) -> None:
        self.name, self.recorder = name, recorder

    def put_annotation(self, key: str, value: Any) -> None:
        self.recorder.annotations.append((self.name, key))

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.recorder.metadata.append((self.name, key, value))


class _XRay:
    """Stands in for the tracer's X-Ray provider: records what the handler decorator puts on its subsegment."""

    def __init__(self) -> None:
        self.annotations: list[tuple[str, str]] = []
        self.metadata: list[tuple[str, str, Any]] = []

    @contextlib.contextmanager
    def in_subsegment(self, name: str, **_: Any) -> Iterator[_Subsegment]:
        yield _Subsegment(name, self)


def test_buffered_handlers_keep_response_bodies_out_of_x_ray(lambda_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A response body is user content (chat answers, files) and can exceed X-Ray's segment size: the chat,
    # submit and data handlers trace the call, not what it answered
    from functions.chat import handler as chat_module
    from functions.data import handler as data_module
    from functions.submit import handler as submit_module

    xray = _XRay()
    monkeypatch.setattr(tracer, "provider", xray)
    ctx, user = FakeLambdaContext(), {"X-User-Id": "u1"}
    chat = _fresh(chat_module)(rest_v1_event("POST", "/api/v1/conversations", {"title": "secret plans"}, user), ctx)
    assert chat["statusCode"] == 201 and "secret plans" in chat["body"]
    submit = _fresh(submit_module)(http_v2_event("POST", "/api/ap/submit", {"runId": "r", "toolId": "t"}, user), ctx)
    assert submit["statusCode"] == 200 and json.loads(submit["body"])["accepted"] is False
    data = _fresh(data_module)(rest_v1_event("GET", "/api/ap/data", None, user, {"file": "c/a.csv"}), ctx)
    assert data["statusCode"] == 404
    # Each call was traced (its subsegment annotated), and no response went into the trace
    assert [key for _, key in xray.annotations].count("ColdStart") == 3
    assert xray.metadata == []
