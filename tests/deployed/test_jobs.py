"""worker, idle_sessions and daily_summary as deployed: EventBridge Scheduler's input exactly as the template
defines it, and the SQS event source's batches (partial batch failures) built from what the queue holds."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent_core.config import Settings
from agent_core.domain.ids import now_ms, sortable_id
from agent_core.domain.models import Message, Role, Run
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.table_store import TableStore
from tests.support.deployed.stack import DeployedStack
from tests.support.lambda_events import http_v2_event, sqs_event, sqs_record
from tests.support.openai_stub import StubScript

CAROL = {"x-user-id": "carol"}
ERIN = {"x-user-id": "erin"}
DAVE = {"x-user-id": "dave"}
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def scheduler_input(stack: DeployedStack, name: str, when: datetime) -> Any:
    """The schedule target's `Input` of the template, as EventBridge Scheduler fills it in at `when`."""
    logical = stack.definition(name).logical_id
    (schedule,) = [
        r
        for r in stack.synthesis.resources("AWS::Scheduler::Schedule").values()
        if r["Properties"]["Target"]["Arn"]["Fn::GetAtt"][0] == logical
    ]
    raw = schedule["Properties"]["Target"]["Input"]
    assert SCHEDULED_TIME in raw, raw
    return json.loads(raw.replace(SCHEDULED_TIME, when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")))


def _kinds(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(json.loads(m["Body"]).get("kind"), json.loads(m["Body"])) for m in messages]


@pytest.fixture(scope="module")
def carol_chat(stack: DeployedStack) -> str:
    """carol's conversation with two turns (enough for a session summary), through the Function URL."""
    chat = stack.function("chat")
    created = chat.invoke(http_v2_event("POST", "/api/v1/conversations", {"title": "jobs"}, CAROL))
    cid = json.loads(created["body"])["conversationId"]
    for message in ("I am planning a trip to Kyoto in spring.", "Which temples should I see first?"):
        turn = chat.invoke(http_v2_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": message}, CAROL))
        assert turn["statusCode"] == 200, turn
    stack.receive_all()  # whatever the turns queued (compaction) is not this module's business
    return cid


@pytest.fixture(scope="module")
def summary_job(stack: DeployedStack, carol_chat: str) -> dict[str, Any]:
    """idle_sessions two hours later: carol's session is closed and its summary job is on the queue."""
    idle = stack.function("idle_sessions")
    report = idle.invoke(scheduler_input(stack, "idle_sessions", datetime.now(UTC) + timedelta(hours=2)))
    assert report["enqueued"] >= 1, report
    jobs = [m for m in stack.receive_all() if json.loads(m["Body"]).get("chat_id") == carol_chat]
    assert [json.loads(m["Body"])["kind"] for m in jobs] == ["session_summary"], jobs
    return jobs[0]


def test_idle_sessions_runs_on_the_schedule_input_and_enqueues_the_summary(summary_job: dict[str, Any]) -> None:
    body = json.loads(summary_job["Body"])
    assert body["user_id"] == "carol" and body["ended_at"] > body["started_at"]


def test_worker_runs_a_batch_and_reports_only_the_failed_records(
    stack: DeployedStack, summary_job: dict[str, Any]
) -> None:
    queue_arn = stack.arn("WorkQueue")
    stack.llm.enqueue(StubScript.text('{"summary": "Carol plans a spring trip to Kyoto.", "keyTopics": ["Kyoto"]}'))
    event = sqs_event([summary_job], queue_arn)
    event["Records"] += [
        sqs_record('{"kind": "session_summary", "chat_id": 7', "malformed-1", queue_arn),
        sqs_record('{"kind": "teleport", "chat_id": "c_x"}', "unknown-kind-1", queue_arn),
    ]
    result = stack.function("worker").invoke(event)
    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == ["malformed-1", "unknown-kind-1"]
    # The summary was written, so the profile extraction follows on the queue (sent by the worker).
    # It carries the job run id of the pass that enqueued the summary (one run, traceable end to end).
    follow_up = [(kind, body) for kind, body in _kinds(stack.receive_all()) if kind == "profile"]
    summary = json.loads(summary_job["Body"])
    assert [
        (body["chat_id"], body["user_id"], body["session_id"], body.get("job_run_id")) for _, body in follow_up
    ] == [(summary["chat_id"], "carol", summary["session_id"], summary["job_run_id"])], follow_up
    assert summary["job_run_id"].startswith("jr_")


def test_daily_summary_enqueues_the_closed_local_day(stack: DeployedStack, carol_chat: str) -> None:
    zone = ZoneInfo(stack.definition("chat").variables.get("AGENT_DEFAULT_TIMEZONE", "Asia/Shanghai"))
    today = datetime.now(zone).date()
    midnight = datetime.combine(today + timedelta(days=1), time(0), zone)
    report = stack.function("daily_summary").invoke(
        scheduler_input(stack, "daily_summary", midnight.astimezone(UTC) + timedelta(minutes=30))
    )
    assert report["enqueued"] >= 1, report
    jobs = [
        body for kind, body in _kinds(stack.receive_all()) if kind == "daily_summary" and body["user_id"] == "carol"
    ]
    assert [j["date"] for j in jobs] == [today.isoformat()], jobs


def test_idle_sessions_keeps_a_summary_whose_enqueue_failed(stack: DeployedStack, summary_job: dict[str, Any]) -> None:
    # Given erin's chat with an open session (after carol's pass, so only this pass closes it)
    chat = stack.function("chat")
    created = chat.invoke(http_v2_event("POST", "/api/v1/conversations", {"title": "outage"}, ERIN))
    cid = json.loads(created["body"])["conversationId"]
    for message in ("Remind me to renew my passport next month.", "Also book the dentist for Tuesday."):
        chat.invoke(http_v2_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": message}, ERIN))
    stack.receive_all()
    when = datetime.now(UTC) + timedelta(hours=4)
    idle = stack.function("idle_sessions")
    # When the queue refuses the pass's summaries
    with stack.denying("idle_sessions", "sqs:SendMessageBatch"):
        failed = idle.invoke(scheduler_input(stack, "idle_sessions", when))
    assert failed["failed"] >= 1 and failed["enqueued"] == 0, failed
    # Then the next pass (five minutes later) still enqueues erin's summary
    idle.invoke(scheduler_input(stack, "idle_sessions", when + timedelta(minutes=5)))
    kinds = [body["kind"] for _, body in _kinds(stack.receive_all()) if body.get("chat_id") == cid]
    assert kinds == ["session_summary"]


def test_idle_sessions_settles_a_run_whose_function_died_holding_the_lease(stack: DeployedStack) -> None:
    # Given dave's chat whose turn died holding its lease (the function was killed mid-turn): the USER
    # message, the running RUN and the lease as the turn's first transaction wrote them, the lease expired
    chat = stack.function("chat")
    created = chat.invoke(http_v2_event("POST", "/api/v1/conversations", {"title": "crash"}, DAVE))
    cid = json.loads(created["body"])["conversationId"]
    client = stack.account.client("dynamodb")
    store = TableStore(DynamoTable(stack.resource("StorageTable"), lambda: client))
    meta = asyncio.run(store.get_chat(cid, "dave"))
    assert meta is not None
    started = now_ms() - 3_600_000
    run = Run(run_id="r-died", chat_id=cid, user_id="dave", request_id="req-died", started_at=started)
    question = "Is my flight on time?"
    message = Message(
        id=sortable_id(started),
        chat_id=cid,
        role=Role.USER,
        content=question,
        run_id=run.run_id,
        request_id=run.request_id,
        created_at=started,
    )
    asyncio.run(store.begin_turn(meta, run, message, Settings().run_lease_ms))
    # When the scheduled pass runs
    idle = stack.function("idle_sessions")
    report = idle.invoke(scheduler_input(stack, "idle_sessions", datetime.now(UTC)))
    # Then the run is failed `interrupted`, replays its question and the error, and the chat takes a turn
    assert report["details"].get("runs_failed", 0) >= 1, report
    replay = chat.invoke(http_v2_event("GET", "/api/ap/chat", None, DAVE, query=f"chatId={cid}"))
    events = [e for e in json.loads(replay["body"])["events"] if e["runId"] == run.run_id]
    assert [(e["type"], e.get("message"), e.get("code")) for e in events] == [
        ("request.query", question, None),
        ("run.error", events[-1]["message"], "interrupted"),
    ]
    turn = chat.invoke(http_v2_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "Hello?"}, DAVE))
    assert turn["statusCode"] == 200, turn
