"""Generated input (schemathesis) against the app's own OpenAPI document, in-process, on every operation.

The app is the local server's (every route) on the in-memory store with the offline model. Each operation
gets a small, derandomized budget; every response must be documented (status, content type, schema) and
none may be a server error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

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
