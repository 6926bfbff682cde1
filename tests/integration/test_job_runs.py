"""Scheduled jobs under faults, traced end to end: the idle pass with SQS failing, session summaries that fail,
the daily catch-up, and one jobRunId from the scheduler through the queue message into the worker's log lines.

The Lambda handlers run on moto (SQS, DynamoDB) with their real wiring; log lines are the Powertools JSON the
functions print to standard output.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
import pytest

from agent_core import lambda_entry as entry
from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import Job, SessionSummaryJob, WorkQueue, dump_job
from agent_core.jobs.daily import CATCH_UP_HOURS, run_daily_summary
from agent_core.jobs.sqs import SqsWorkQueue
from agent_core.jobs.worker import process_batch
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.memory.calendar import day_bounds, local_date, zone
from agent_core.observability import logger
from agent_core.store.memory_table import MemoryTable
from tests.integration.test_jobs_entrypoints import _event_from, _receive_all, _sqs_record, lambda_env, queue_url
from tests.support.aws_faults import failing_call
from tests.support.fake_llm import ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.lambda_events import FakeLambdaContext
from tests.support.sse import events_in

__all__ = ["lambda_env", "queue_url"]  # fixtures shared with the entry-point tests
USER = "alice"
MESSAGES = ("I want to plan a trip to Kyoto in April with my family", "our budget is about 8000 CNY for flights")


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """What the Powertools logger writes (JSON lines on standard output in Lambda), captured."""
    target = logging.getLogger(logger.name)
    formatter = next(h.formatter for h in target.handlers if h.formatter is not None)
    buffer = io.StringIO()
    # A handler of its own (with Powertools' JSON formatter), so no handler added or re-pointed meanwhile by
    # another module loses a line.
    capture = logging.StreamHandler(buffer)
    capture.setFormatter(formatter)
    target.addHandler(capture)
    try:
        yield buffer
    finally:
        target.removeHandler(capture)


def _log_lines(out: str) -> list[dict[str, Any]]:
    """The log lines, parsed."""
    return [json.loads(raw) for raw in out.splitlines() if raw.startswith("{")]


def _one(lines: list[dict[str, Any]], message: str) -> dict[str, Any]:
    found = [line for line in lines if line["message"] == message]
    assert len(found) == 1, (message, [line["message"] for line in lines])
    return found[0]


async def _open_session(ctx: AppContext) -> str:
    """Two turns in a new chat (the real stream route): a session worth summarising is open."""
    app = build_app(*routes.local, context=ctx)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers={"X-User-Id": USER}) as client:
        first = await client.post("/api/ap/query", json={"message": MESSAGES[0]})
        assert first.status_code == 200
        chat_id = str(events_in(first.text)[0]["chatId"])
        second = await client.post("/api/ap/query", json={"message": MESSAGES[1], "chatId": chat_id})
        assert second.status_code == 200
    chat = await ctx.deps.chats.get_chat(chat_id, USER)
    assert chat is not None and chat.session_id is not None
    return chat_id


def test_idle_pass_with_sqs_failing_loses_nothing_and_the_id_flows_into_the_worker(
    lambda_env: None, queue_url: str, log_output: io.StringIO
) -> None:
    from functions.idle_sessions.handler import handler as idle_sessions
    from functions.worker.handler import handler as worker

    ctx = entry.lambda_context()
    queue = ctx.deps.work_queue
    assert isinstance(queue, SqsWorkQueue)  # as context.py wires it in Lambda with a queue URL
    chat_id = entry.run(_open_session(ctx))
    later = {"scheduledTime": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
    log_output.truncate(0)
    log_output.seek(0)

    # Given SQS refusing the pass's SendMessageBatch
    with failing_call(queue.client, "sqs", "SendMessageBatch", 1, code="ServiceUnavailable") as fault:
        failed = idle_sessions(later, FakeLambdaContext(function_name="agent-core-idle-sessions"))
    # Then the pass reports the failure and the session is still open and due: nothing was lost
    assert fault.raised == [1]
    assert failed["failed"] == 1 and failed["enqueued"] == 0 and "closed" not in failed["details"]
    chat = entry.run(ctx.deps.chats.get_chat(chat_id, USER))
    assert chat is not None and chat.session_id is not None
    assert _receive_all(queue_url) == []

    # When the next pass runs, it catches up: enqueued, then closed
    caught_up = idle_sessions(later, FakeLambdaContext(function_name="agent-core-idle-sessions"))
    assert caught_up["enqueued"] == 1 and caught_up["details"]["closed"] == 1 and caught_up["failed"] == 0
    run_id = caught_up["job_run_id"]
    assert run_id.startswith("jr_") and run_id != failed["job_run_id"]
    messages = _receive_all(queue_url)
    (body,) = [json.loads(m["Body"]) for m in messages]
    assert body["kind"] == "session_summary" and body["job_run_id"] == run_id
    closed = entry.run(ctx.deps.chats.get_chat(chat_id, USER))
    assert closed is not None and closed.session_id is None

    # And the worker summarises it, logging under the scheduler's run id, and passes the id on
    assert worker(_event_from(messages), FakeLambdaContext(function_name="agent-core-worker")) == {
        "batchItemFailures": []
    }
    (session,) = entry.run(ctx.deps.memory_store.list_sessions(chat_id))
    assert session.summary and not session.skipped
    # The summary queues the session's memory records and then the profile facts, both under the same run id.
    records_job, profile_job = [json.loads(m["Body"]) for m in _receive_all(queue_url)]
    assert records_job["kind"] == "memory_records" and records_job["job_run_id"] == run_id
    assert profile_job["kind"] == "profile" and profile_job["job_run_id"] == run_id

    lines = _log_lines(log_output.getvalue())
    ends = [line for line in lines if line["message"] == "idle_sessions_end"]
    assert [(e["failed"], e["enqueued"], e["jobRunId"]) for e in ends] == [
        (1, 0, failed["job_run_id"]),
        (0, 1, run_id),
    ]
    assert all(isinstance(e["durationMs"], int) and e["scanned"] == 1 for e in ends)
    assert [line["jobRunId"] for line in lines if line["message"] == "idle_sessions_start"] == [
        failed["job_run_id"],
        run_id,
    ]
    not_enqueued = _one(lines, "session summaries not enqueued: the sessions stay open for the next pass")
    assert not_enqueued["jobRunId"] == failed["job_run_id"] and not_enqueued["level"] == "ERROR"
    batch_end = _one(lines, "worker_batch_end")
    assert batch_end["scanned"] == 1 and batch_end["summarised"] == 1 and batch_end["failed"] == 0
    done = _one(lines, "job done")
    assert done["jobRunId"] == run_id and done["batchRunId"] == batch_end["jobRunId"] != run_id
    assert done["jobKind"] == "session_summary"
    # Every line the worker's job caused carries the scheduler's id (none leaks the batch's in its place)
    batch_start = lines.index(_one(lines, "worker_batch_start"))
    caused = [line for line in lines[batch_start + 1 :] if "batchRunId" in line]
    assert caused and all(line["jobRunId"] == run_id for line in caused)


class FailsOnce:
    """The app's work queue, except that the first call of `method` fails as if the queue were unavailable."""

    def __init__(self, queue: WorkQueue, method: Literal["enqueue", "enqueue_many"]) -> None:
        self.queue, self.method, self.calls = queue, method, 0

    def _call(self, method: str) -> None:
        if method == self.method:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("queue unavailable")

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        self._call("enqueue")
        await self.queue.enqueue(job, delay_s)

    async def enqueue_many(self, jobs: list[Job]) -> None:
        self._call("enqueue_many")
        await self.queue.enqueue_many(jobs)


class FlakySummaries(ScriptedLlm):
    """Summarisation plays `outcomes` in order (an exception, an empty answer, or the summary text)."""

    def __init__(self, *outcomes: Exception | str) -> None:
        super().__init__()
        self.outcomes = list(outcomes)

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        if request.purpose != "summarize":
            async for delta in super().stream(request):
                yield delta
            return
        outcome = self.outcomes.pop(0) if self.outcomes else '{"summary": "A trip to Kyoto.", "keyTopics": ["Kyoto"]}'
        if isinstance(outcome, Exception):
            raise outcome
        yield LlmDelta(content=outcome)
        yield LlmDelta(finish_reason="stop")


@pytest.mark.parametrize("failure", [RuntimeError("upstream 503"), ""], ids=["llm-error", "empty-summary"])
async def test_a_session_summary_that_fails_is_retried_by_redelivery(failure: Exception | str) -> None:
    # Given a closed session whose summary job fails once
    llm = FlakySummaries(failure)
    ctx = build_context(make_settings(), table=MemoryTable(), llm=llm, audit=lambda _: None)
    chat_id = await _open_session(ctx)
    chat = await ctx.deps.chats.get_chat(chat_id, USER)
    assert chat is not None and chat.session_id is not None
    job = SessionSummaryJob(
        chat_id=chat_id,
        user_id=USER,
        session_id=chat.session_id,
        started_at=chat.session_started_at or 0,
        ended_at=chat.last_activity_at,
        job_run_id="jr_test",
    )
    await ctx.deps.memory_store.close_session(chat_id, chat.session_id)
    event = {"Records": [_sqs_record(dump_job(job), "m-1")]}
    # When the worker runs it: the record is reported failed and nothing is written
    assert await process_batch(event, ctx.jobs) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert await ctx.deps.memory_store.list_sessions(chat_id) == []
    # Then SQS redelivers it and the summary is written
    assert await process_batch(event, ctx.jobs) == {"batchItemFailures": []}
    (session,) = await ctx.deps.memory_store.list_sessions(chat_id)
    assert session.summary == "A trip to Kyoto." and session.key_topics == ["Kyoto"]
    await ctx.background.join()


async def test_the_daily_pass_catches_up_days_whose_summary_never_came() -> None:
    # Given a user-day that closed hours ago (its own pass is long past) and never got its summary
    ctx = build_context(make_settings(), table=MemoryTable(), llm=FlakySummaries(), audit=lambda _: None)
    await _open_session(ctx)
    tz = zone(None, ctx.settings.default_timezone)
    today = local_date(int(datetime.now(UTC).timestamp() * 1000), tz)
    _, close_ms = day_bounds(today, tz)
    closed_at = datetime.fromtimestamp(close_ms / 1000, UTC)
    late = closed_at + timedelta(hours=5, minutes=30)
    ctx.deps.work_queue = FailsOnce(ctx.deps.work_queue, "enqueue_many")
    # When a pass runs hours later and cannot enqueue, then the next one runs
    first = await run_daily_summary(ctx.deps, late)
    assert first.failed == 1 and first.enqueued == 0 and first.details["caught_up"] == 1
    second = await run_daily_summary(ctx.deps, late + timedelta(hours=1))
    await ctx.background.join()
    # Then the second catches the day up and it is summarised
    assert second.enqueued == 1 and second.failed == 0
    days = await ctx.deps.memory_store.daily_range(USER, today.isoformat(), today.isoformat())
    assert len(days) == 1 and days[0].summary == "A trip to Kyoto."
    # And a done day leaves the index: later passes no longer read it
    third = await run_daily_summary(ctx.deps, late + timedelta(hours=2))
    assert third.scanned == 0
    # And the catch-up is bounded: a day closed longer ago than the window is not read
    assert (await run_daily_summary(ctx.deps, closed_at + timedelta(hours=CATCH_UP_HOURS + 3))).scanned == 0


async def test_ending_a_session_with_the_queue_failing_keeps_it_open_for_the_retry() -> None:
    ctx = build_context(make_settings(), table=MemoryTable(), llm=FlakySummaries(), audit=lambda _: None)
    chat_id = await _open_session(ctx)
    ctx.deps.work_queue = FailsOnce(ctx.deps.work_queue, "enqueue")
    app = build_app(*routes.local, context=ctx)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers={"X-User-Id": USER}) as client:
        # When ending the session cannot enqueue its summary: an error, and the session is still open
        failed = await client.post(f"/api/ap/chat/{chat_id}/end")
        assert failed.status_code == 500
        chat = await ctx.deps.chats.get_chat(chat_id, USER)
        assert chat is not None and chat.session_id is not None
        # Then the retry ends it and the summary is written
        ended = (await client.post(f"/api/ap/chat/{chat_id}/end")).json()
        assert ended["ended"] is True and ended["sessionId"] == chat.session_id
    await ctx.background.join()
    (session,) = await ctx.deps.memory_store.list_sessions(chat_id)
    assert session.summary == "A trip to Kyoto."
