"""Generated input (schemathesis) against the app's own OpenAPI document, in-process, on every operation.

The app is the local server's (every route) on the in-memory store with the offline model. Each operation
gets a small, derandomized budget; every response must be documented (status, content type, schema) and
none may be a server error.

Generation from the document alone rarely gets past a wire's own checks and never declares many tools
(lists come out short): the tool-carrying wires (Responses, Chat Completions, AG-UI, the UI stream) get a second generator below, with tool lists of 0 to 140 entries around OpenAI's 128.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, example, given
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.testclient import TestClient

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 25

app = build_app(*routes.local, context=build_context(make_settings(AGENT_STAGE="dev"), table=MemoryTable()))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)
cases: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def budget_report() -> Iterator[None]:
    yield
    print(f"\nschemathesis: {len(cases)} operations, {sum(cases.values())} cases")
    print(f"tool lists (path, status, over 128): {sorted(SEEN.items())}")


@schema.parametrize()
@hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: schemathesis.Case) -> None:
    cases[case.operation.label] += 1
    case.call_and_validate(checks=CHECKS)


# ----- tool lists on the wires that take them -----

TOOL_WIRES = ("/v1/responses", "/v1/chat/completions", "/api/ag-ui", "/api/ag-ui/main-agent", "/api/ui-stream")
_NAMES = st.one_of(st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True), st.text(max_size=70))
_SCHEMAS = st.one_of(
    st.none(),
    st.just({"type": "object", "properties": {"city": {"type": "string"}}}),
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
)


@st.composite
def _tool_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """0 to 140 function tools: half the lists clean (unique valid names), half with any name and description."""
    size, clean = draw(st.integers(0, 140)), draw(st.booleans())
    descriptions = st.text(max_size=20) if clean else st.one_of(st.text(max_size=20), st.just("d" * 8193))
    return [
        {
            "name": f"tool_{n}" if clean else draw(_NAMES),
            "description": draw(descriptions),
            "parameters": draw(_SCHEMAS),
        }
        for n in range(size)
    ]


def _tool_body(path: str, functions: list[dict[str, Any]], answer: bool, stream: bool) -> dict[str, Any]:
    """A body of the wire at `path` declaring `functions` (the UI stream: as tool parts of its messages);
    `answer`: it continues with a tool result the thread does not owe."""
    names = [f["name"] for f in functions]
    if path == "/v1/responses":
        tools = [{"type": "function", **f} for f in functions]
        result = [{"type": "function_call_output", "call_id": "call_x", "output": "{}"}]
        return {"model": "main-agent", "input": result if answer else "hi", "tools": tools, "stream": stream}
    if path == "/v1/chat/completions":
        messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
        if answer:
            messages.append({"role": "tool", "tool_call_id": "call_x", "content": "{}"})
        tools = [{"type": "function", "function": f} for f in functions]
        return {"model": "main-agent", "messages": messages, "tools": tools, "stream": stream}
    if path.startswith("/api/ag-ui"):
        messages = [{"id": "m1", "role": "user", "content": "hi"}]
        if answer:
            messages.append({"id": "t1", "role": "tool", "toolCallId": "call_x", "content": "{}"})
        return {
            "threadId": "fuzz-thread",
            "runId": "r",
            "state": {},
            "messages": messages,
            "tools": functions,
            "context": [],
            "forwardedProps": {},
        }
    parts: list[dict[str, Any]] = [
        {"type": f"tool-{name}", "toolCallId": f"c{n}", "state": "output-available", "input": {}, "output": {}}
        for n, name in enumerate(names)
    ]
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}, *parts[:3]]}
    messages = [{"id": "a0", "role": "assistant", "parts": parts}, user]
    if answer:
        output = {"type": "dynamic-tool", "toolName": names[0] if names else "x", "toolCallId": "call_x"}
        messages.append(
            {"id": "a1", "role": "assistant", "parts": [{**output, "state": "output-available", "output": 1}]}
        )
    return {"id": "fuzz-chat", "messages": messages, "trigger": "submit-message", "tools": functions}


SEEN: Counter[Any] = Counter()
_STATUSES = {path: {"200", "400", "401", "404", "409", "413", "422"} for path in TOOL_WIRES}


@pytest.mark.parametrize("path", TOOL_WIRES)
@given(functions=_tool_lists(), answer=st.booleans(), stream=st.booleans())
@example(
    functions=[{"name": f"t{n}", "description": "d", "parameters": None} for n in range(129)], answer=False, stream=True
)
@example(
    functions=[{"name": f"t{n}", "description": "d", "parameters": None} for n in range(128)], answer=False, stream=True
)
@hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_tool_lists_are_answered_or_refused_with_a_documented_4xx(
    path: str, functions: list[dict[str, Any]], answer: bool, stream: bool
) -> None:
    with TestClient(app, raise_server_exceptions=False) as http:
        response = http.post(path, json=_tool_body(path, functions, answer, stream), headers={"X-User-Id": "fuzz"})
    SEEN[(path, response.status_code, len(functions) > 128)] += 1
    assert str(response.status_code) in _STATUSES[path], (path, response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/json"
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"] and isinstance(error["message"], str)
        assert error["type"] == "invalid_request_error"
        if len(functions) > 128 and not answer:
            assert error["param"] == "tools"
    else:
        kinds = ("text/event-stream", "application/json")
        assert response.headers["content-type"].startswith(kinds)


# ----- what the document says -----


def _doc() -> dict[str, Any]:
    document: dict[str, Any] = app.openapi()
    return document


def test_event_stream_routes_are_documented_as_text_event_stream() -> None:
    paths = _doc()["paths"]
    for path in ("/api/ap/query", "/api/chat/stream"):
        assert list(paths[path]["post"]["responses"]["200"]["content"]) == ["text/event-stream"], path
    # A Response, or its events when asked to stream
    for path, method in (("/v1/responses", "post"), ("/v1/responses/{response_id}", "get")):
        content = paths[path][method]["responses"]["200"]["content"]
        assert set(content) == {"application/json", "text/event-stream"}, path


def test_error_responses_share_one_schema_and_name_their_statuses() -> None:
    doc = _doc()
    assert set(doc["components"]["schemas"]["ErrorBody"]["properties"]) == {"error", "data"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    expected = {
        ("/api/ap/query", "post"): {"400", "401", "404", "409", "413", "422", "503"},
        ("/api/v1/conversations/{conversation_id}/chat", "post"): {
            "400",
            "401",
            "404",
            "409",
            "413",
            "422",
            "502",
            "503",
            "504",
        },
        ("/v1/responses", "post"): {"400", "401", "404", "409", "413", "502", "503", "504"},
        ("/v1/conversations", "post"): {"400", "401", "413"},
        ("/api/ap/submit", "post"): {"401", "413", "422"},
        ("/api/ap/data", "get"): {"400", "401", "403", "404", "422", "503"},
    }
    for (path, method), statuses in expected.items():
        responses = doc["paths"][path][method]["responses"]
        errors = {status for status in responses if status.startswith(("4", "5"))}
        assert errors == statuses, (path, errors)
        for status in errors:
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)
