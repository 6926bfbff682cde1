"""Shared pieces of the benchmarks: a zero-latency fake LLM, settings, tables, moto, percentiles."""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core.config import Settings
from agent_core.container import RunDeps
from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.llm.tokens import estimate_messages
from agent_core.observability import logger, metrics
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn

if TYPE_CHECKING:
    from agent_core.store.dynamodb import DynamoTable

# A user question and an answer of a realistic size (about 30 and 45 estimated tokens).
USER_MESSAGE = (
    "Could you remind me what we decided about the quarterly report format, and which numbers "
    "still need checking before Friday?"
)
ANSWER_PARTS = (
    "We agreed on a two-page summary with the revenue table first and the risks section last. ",
    "The churn figure for March and the EMEA headcount still need checking before Friday.",
)
SUMMARY_TEXT = "The user is preparing the quarterly report. " * 8  # a fixed-size summary (~90 tokens)


@dataclass
class LlmCall:
    """One request the fake model received."""

    purpose: str
    at: float
    messages: int
    tokens: int | None


@dataclass
class FakeLlm:
    """An in-process LlmClient with no latency.

    `stream` is an async generator, so its body runs when the loop first iterates it: that moment,
    taken with `time.perf_counter()`, is "the first LLM request sent". Chat requests get two content
    deltas, a `stop` finish and a usage delta; summarisation requests get a fixed-size summary.
    """

    estimate_tokens: bool = False
    calls: list[LlmCall] = field(default_factory=list)
    on_call: Callable[[LlmRequest], None] | None = None

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        at = time.perf_counter()
        if self.on_call is not None:
            self.on_call(request)
        tokens = estimate_messages(request.messages) if self.estimate_tokens else None
        self.calls.append(LlmCall(request.purpose, at, len(request.messages), tokens))
        parts = (SUMMARY_TEXT,) if request.purpose == "summarize" else ANSWER_PARTS
        for part in parts:
            yield LlmDelta(content=part)
        yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=Usage(prompt_tokens=tokens or 0, completion_tokens=40))

    def chat_calls(self) -> list[LlmCall]:
        return [c for c in self.calls if c.purpose == "chat"]

    def summarize_calls(self) -> list[LlmCall]:
        return [c for c in self.calls if c.purpose == "summarize"]


def make_settings(**overrides: Any) -> Settings:
    """Settings like tests/support/fixtures.py: no .env file, the offline model, compaction at its defaults."""
    base: dict[str, Any] = {
        "AGENT_STORAGE": "memory",
        "AGENT_LLM_PROVIDER": "offline",
        # The defaults, stated so a variable set on the machine cannot change what is measured.
        "AGENT_MEMORY_WINDOW": 20,
        "AGENT_MEMORY_COMPACT_AFTER": 40,
    }
    base.update(overrides)
    return Settings(_env_file=None, **base)


def quiet_observability() -> None:
    """Keep Powertools output out of the results: INFO logs off, the metric buffer emptied."""
    logger.setLevel("WARNING")
    metrics.clear_metrics()


def after_turn() -> None:
    """What Lambda's `@metrics.log_metrics` does at the end of each invocation, minus the print."""
    metrics.clear_metrics()


_FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_UNSET = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE")


@contextmanager
def moto_aws() -> Iterator[None]:
    """moto's in-process AWS with fake credentials (as in the test fixtures); nothing leaves the machine."""
    from moto import mock_aws

    saved = {name: os.environ.get(name) for name in (*_FAKE_AWS, *_UNSET)}
    os.environ.update(_FAKE_AWS)
    for name in _UNSET:
        os.environ.pop(name, None)
    try:
        with mock_aws():
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def moto_table(settings: Settings, on_client: Callable[[Any], None] | None = None) -> DynamoTable:
    """A DynamoTable on moto, the table created by `ensure_resources`; call inside `moto_aws()`.

    `on_client` sees the table's own boto3 client when the table builds it (to register event hooks).
    """
    import boto3

    from agent_core.store.dynamodb import DynamoTable
    from agent_core.store.embedded import ensure_resources

    region = "us-east-1"
    ensure_resources(settings, boto3.client("dynamodb", region_name=region), boto3.client("s3", region_name=region))

    def factory() -> Any:
        client = boto3.client("dynamodb", region_name=region)
        if on_client is not None:
            on_client(client)
        return client

    return DynamoTable(settings.table_name, factory)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def machine() -> dict[str, str]:
    import platform

    return {
        "cpus": str(len(os.sched_getaffinity(0))),  # what `nproc` prints
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


async def open_chat(deps: RunDeps, user_id: str, message: str = USER_MESSAGE) -> str:
    """Run the turn that creates a chat (no chat id) through the real pipeline; returns the new chat's id."""
    prepared = await prepare_turn(deps, TurnRequest(user_id=user_id, message=message))
    assert isinstance(prepared, PreparedTurn)
    async for _ in TurnRunner(prepared).events():
        pass
    return prepared.chat.chat_id


READ_OPS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
WRITE_OPS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})


@dataclass
class DdbCall:
    operation: str
    started: float
    ended: float = 0.0

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


@dataclass
class DdbCallLog:
    """Every DynamoDB call of the clients it is attached to, from botocore's before-call/after-call events.

    The span covers botocore's serialising, moto's handling (or the network) and parsing, retries included.
    """

    calls: list[DdbCall] = field(default_factory=list)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        call = DdbCall(model.name, time.perf_counter())
        context["bench_call"] = call
        self.calls.append(call)

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        call = context.get("bench_call")
        if isinstance(call, DdbCall):
            call.ended = time.perf_counter()

    def since(self, index: int) -> list[DdbCall]:
        return self.calls[index:]
