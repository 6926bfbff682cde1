"""Generated input (schemathesis) against the app's own OpenAPI document, in-process, on every operation.

The app is the local server's (every route) on the in-memory store with the offline model. Each operation
gets a small, derandomized budget; every response must be documented (status, content type, schema) and
none may be a server error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

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
from agent_core.store.memory import MemoryTable
from tests.support.fixtures import make_settings

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 12

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
