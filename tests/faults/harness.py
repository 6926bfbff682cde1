"""One app on moto (DynamoDB + S3) with the real openai SDK against the loopback stub, faults injectable.

Every fault case drives turns through the HTTP routes in-process and then checks the same invariants
(`check_turn`): what the client saw, the user message stored once, no partial answer stored as complete,
replay consistent with what is stored, and the next turn on the chat accepted at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.events import TERMINAL_TYPES
from agent_core.domain.models import Role, RunStatus
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.embedded import ensure_resources
from agent_core.store.s3 import S3BlobStore, make_s3_client
from agent_core.store.table_store import TableStore
from tests.support.faults import FaultPlan
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub
from tests.support.sse import events_in

USER = "alice"
STORAGE_ERRORS = {"service_unavailable"}


@dataclass
class Harness:
    context: AppContext
    client: httpx.AsyncClient
    stub: OpenAiStub
    clients: tuple[Any, ...]
    plan: FaultPlan = field(default_factory=FaultPlan)
    app: Any = None  # the ASGI app itself, for cases the HTTP client cannot produce (a client gone at once)

    @property
    def store(self) -> TableStore:
        store = self.context.deps.turns
        assert isinstance(store, TableStore)
        return store

    def inject(self, plan: FaultPlan) -> FaultPlan:
        self.plan.uninstall()
        self.plan = plan.install(*self.clients)
        return plan

    def heal(self) -> None:
        self.plan.uninstall()
        self.plan = FaultPlan().install(*self.clients)

    async def new_chat(self) -> str:
        response = await self.client.post("/api/v1/conversations", json={"title": "faults"})
        assert response.status_code == 201
        return str(response.json()["conversationId"])

    async def query(self, chat_id: str, message: str, request_id: str) -> Seen:
        body = {"message": message, "chatId": chat_id, "requestId": request_id}
        response = await self.client.post("/api/ap/query", json=body)
        # The jobs the turn queued (its usage ledger write, after the answer) run before the calls are read.
        await self.context.background.join()
        if response.status_code != 200:
            return Seen(response.status_code, [], response.json(), response.headers.get("retry-after"))
        return Seen(200, events_in(response.text), None, None)

    async def chat(self, chat_id: str, message: str) -> httpx.Response:
        return await self.client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": message})


@dataclass
class Seen:
    """What the client got: a stream's events, or an error status and body."""

    status: int
    events: list[dict[str, Any]]
    error: dict[str, Any] | None
    retry_after: str | None

    @property
    def terminal(self) -> dict[str, Any] | None:
        return self.events[-1] if self.events and self.events[-1]["type"] in TERMINAL_TYPES else None

    def text(self) -> str:
        return "".join(e["delta"] for e in self.events if e["type"] == "content.delta")


def build_harness(stub: OpenAiStub, **overrides: Any) -> Harness:
    """Inside `aws_env` (moto): the table and bucket, boto3 clients the faults hook into, the app."""
    settings = make_settings(
        AGENT_STORAGE="embedded",
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=stub.base_url,
        OPENAI_API_KEY="sk-faults",
        AGENT_STORE_RETRY_BASE_MS="1",
        AGENT_USAGE_HANDOFF_DELAY_S="0",  # a ledger record a lasting fault hands off runs again at once
        **overrides,
    )
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    s3 = make_s3_client(settings)
    ensure_resources(settings, ddb, s3)
    table = DynamoTable(settings.table_name, lambda: ddb)
    blobs = S3BlobStore(settings.data_bucket, lambda: s3)
    llm = OpenAiLlmClient(settings)
    context = build_context(settings, table=table, llm=llm, blobs=blobs, audit=lambda line: None)
    app = build_app(*routes.chat, *routes.stream_routes, context=context)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://faults", headers={"X-User-Id": USER}, timeout=60
    )
    harness = Harness(context, client, stub, (ddb, s3), app=app)
    harness.heal()
    return harness


async def check_turn(h: Harness, chat_id: str, question: str, answer: str, seen: Seen) -> str:
    """The invariants every fault case keeps; returns what the client saw, for the case tables."""
    h.heal()
    # What the client sees: a terminal event ending a whole stream, or an error status with a stable code
    if seen.status != 200:
        assert seen.status == 503 and seen.error is not None, (seen.status, seen.error)
        assert seen.error["error"]["code"] in STORAGE_ERRORS and seen.retry_after, seen.error
        outcome = f"{seen.status} {seen.error['error']['code']}"
    else:
        assert seen.terminal is not None, f"stream cut without a terminal event: {[e['type'] for e in seen.events]}"
        assert [e["seq"] for e in seen.events] == list(range(1, len(seen.events) + 1))
        terminal = seen.terminal
        outcome = terminal["type"] if terminal["type"] != "run.error" else f"run.error {terminal['code']}"
    # The user message is stored once (never, only when the client was told the turn did not start)
    messages = await h.store.messages_between(chat_id, None, None)
    asked = [m for m in messages if m.role == Role.USER and m.content == question]
    if seen.status == 200:
        assert len(asked) == 1, len(asked)
    else:
        assert len(asked) <= 1, len(asked)
    # No partial answer stored as complete; a run the client saw complete is stored complete
    runs, _ = await h.store.list_runs(chat_id, 100, None)
    for listed in runs:
        run = await h.store.get_run(chat_id, listed.run_id)
        assert run is not None
        assert run.status != RunStatus.RUNNING, f"run {run.run_id} left running"
        answers = [m for m in messages if m.run_id == run.run_id and m.role == Role.ASSISTANT and not m.tool_calls]
        if run.status == RunStatus.COMPLETED:
            assert run.result is not None and run.result.assistant_message == answer
            assert [m.content for m in answers] == [answer]
        else:
            assert answers == [], "a failed run stored an answer"
    if seen.terminal is not None and seen.terminal["type"] == "run.complete":
        completed = [r for r in runs if r.run_id == seen.terminal["runId"]]
        assert completed and completed[0].status == RunStatus.COMPLETED, "the client saw an answer that was lost"
    # Replay is consistent with what is stored: per run, its terminal event and its answer
    replay = (await h.client.get("/api/ap/chat", params={"chatId": chat_id})).json()
    for run in runs:
        entries = [e for e in replay["events"] if e["runId"] == run.run_id]
        terminal_types = [e["type"] for e in entries if e["type"] in TERMINAL_TYPES]
        expected = {
            RunStatus.COMPLETED: "run.complete",
            RunStatus.FAILED: "run.error",
            RunStatus.CANCELLED: "run.cancel",
        }
        assert terminal_types == [expected[run.status]], (run.status, terminal_types)
        if run.status == RunStatus.COMPLETED:
            texts = [e["text"] for e in entries if e["type"] == "content.snapshot"]
            assert texts and texts[-1] == answer
    # The next turn on the chat is accepted at once: no lease left behind
    chat = await h.store.get_chat(chat_id, USER)
    assert chat is not None and chat.active_run_id is None, "lease left held"
    after = await h.query(chat_id, "and now?", f"next-{chat_id}")
    assert after.status == 200 and after.terminal is not None and after.terminal["type"] == "run.complete", after
    return outcome
