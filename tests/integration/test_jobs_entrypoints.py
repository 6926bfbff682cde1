"""The job entry points: the SQS queue, the batch consumer, the worker and scheduled Lambdas, dev routes, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from agent_core import lambda_entry as entry
from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.config import Settings, get_settings
from agent_core.container import RunDeps
from agent_core.context import AppContext, build_context
from agent_core.domain.jobs import CompactJob, DailySummaryJob, Job, dump_job
from agent_core.domain.models import Chat, Message, Role
from agent_core.jobs.handlers import JOB_HANDLERS, ScheduledJob, ScheduledPass
from agent_core.jobs.report import JobReport
from agent_core.jobs.sqs import EnqueueError, SqsWorkQueue
from agent_core.jobs.worker import process_batch
from agent_core.store.embedded import ensure_resources
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.lambda_events import FakeLambdaContext, sqs_event, sqs_record

REGION = "us-east-1"
QUEUE_NAME = "agent-core-work"
SCHEDULER_INPUT = {"scheduledTime": "2026-01-08T16:30:00Z"}
SCHEDULED_AT = datetime(2026, 1, 8, 16, 30, tzinfo=UTC)


# --- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def queue_url(aws_env: None) -> str:
    return str(boto3.client("sqs", region_name=REGION).create_queue(QueueName=QUEUE_NAME)["QueueUrl"])


class RecordingClient:
    """A boto3 SQS client wrapper that records each call's keyword arguments."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return getattr(self.client, name)(**kwargs)

        return call


def _receive_all(url: str) -> list[dict[str, Any]]:
    client = boto3.client("sqs", region_name=REGION)
    messages: list[dict[str, Any]] = []
    while True:
        got = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not got:
            return messages
        messages += got


QUEUE_ARN = f"arn:aws:sqs:{REGION}:123456789012:{QUEUE_NAME}"


def _sqs_record(body: str, message_id: str) -> dict[str, Any]:
    return sqs_record(body, message_id, QUEUE_ARN)


def _event_from(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return sqs_event(messages, QUEUE_ARN)


def _compact(chat_id: str) -> CompactJob:
    return CompactJob(chat_id=chat_id, model="gpt-4.1-mini")


# --- SqsWorkQueue on moto -------------------------------------------------------------------------


async def test_enqueue_sends_the_job_with_its_delay_capped_at_900_s(queue_url: str) -> None:
    client = RecordingClient(boto3.client("sqs", region_name=REGION))
    queue = SqsWorkQueue(queue_url, lambda: client)
    await queue.enqueue(_compact("c_now"))
    await queue.enqueue(_compact("c_later"), delay_s=30)
    await queue.enqueue(_compact("c_much_later"), delay_s=5000)
    assert [kwargs["DelaySeconds"] for _, kwargs in client.calls] == [0, 30, 900]
    received = _receive_all(queue_url)  # the delayed messages are not visible yet
    assert [json.loads(m["Body"]) for m in received] == [json.loads(dump_job(_compact("c_now")))]


async def test_enqueue_many_sends_23_jobs_in_batches_of_10(queue_url: str) -> None:
    client = RecordingClient(boto3.client("sqs", region_name=REGION))
    jobs: list[Job] = [_compact(f"c_{n:02d}") for n in range(23)]
    await SqsWorkQueue(queue_url, lambda: client).enqueue_many(jobs)
    assert [len(kwargs["Entries"]) for name, kwargs in client.calls if name == "send_message_batch"] == [10, 10, 3]
    bodies = sorted(json.loads(m["Body"])["chat_id"] for m in _receive_all(queue_url))
    assert bodies == [f"c_{n:02d}" for n in range(23)]


class FlakyBatchClient:
    """send_message_batch fails entry "1" once (server side) and entry "2" always (sender's fault)."""

    def __init__(self) -> None:
        self.attempts: list[list[str]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [e["Id"] for e in Entries]
        self.attempts.append(ids)
        failed = [{"Id": "2", "SenderFault": True, "Code": "InvalidParameterValue"}] if "2" in ids else []
        if len(self.attempts) == 1:
            failed.append({"Id": "1", "SenderFault": False, "Code": "InternalError"})
        return {"Successful": [{"Id": i} for i in ids if i not in {f["Id"] for f in failed}], "Failed": failed}


async def test_enqueue_many_retries_only_failed_entries_then_raises() -> None:
    client = FlakyBatchClient()
    jobs: list[Job] = [_compact("c_a"), _compact("c_b"), DailySummaryJob(user_id="u1", date="2026-01-08")]
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)  # the pause asked for; no real waiting in tests

    with pytest.raises(EnqueueError) as raised:
        await SqsWorkQueue("https://sqs.example/q", lambda: client, sleep=sleep).enqueue_many(jobs)
    assert client.attempts == [["0", "1", "2"], ["1"]]  # the server-side failure retried alone, once
    assert raised.value.failures == [("daily_summary", "InvalidParameterValue")]
    assert pauses == [0.1]  # one pause, the first step


async def test_enqueue_many_gives_up_on_entries_failing_every_send() -> None:
    class AlwaysFailing:
        def __init__(self) -> None:
            self.sends = 0

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.sends += 1
            return {"Successful": [], "Failed": [{"Id": e["Id"], "SenderFault": False, "Code": "x"} for e in Entries]}

    client = AlwaysFailing()
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    with pytest.raises(EnqueueError) as raised:
        await SqsWorkQueue("https://sqs.example/q", lambda: client, sleep=sleep).enqueue_many([_compact("c_a")])
    # Four sends in all, 0.1, 0.2 and 0.4 s apart (no jitter), then the job is reported unsent
    assert client.sends == 4 and pauses == [0.1, 0.2, 0.4]
    assert raised.value.failures == [("compact", "retries_exhausted")]


# --- process_batch --------------------------------------------------------------------------------


async def test_a_malformed_and_a_failing_record_are_reported_and_the_ok_one_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handled: list[str] = []

    async def handle(job: Job) -> None:
        assert isinstance(job, CompactJob)
        if job.chat_id == "c_bad":
            raise RuntimeError("boom")
        handled.append(job.chat_id)

    event = {
        "Records": [
            _sqs_record('{"kind": "compact", "api_key": "sk-very-secret"', "m-malformed"),
            _sqs_record(dump_job(_compact("c_bad")), "m-failing"),
            _sqs_record(dump_job(_compact("c_ok")), "m-ok"),
        ]
    }
    response = await process_batch(event, handle)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-malformed"}, {"itemIdentifier": "m-failing"}]}
    assert handled == ["c_ok"]
    errors = [
        (r.getMessage(), r.__dict__.get("messageId"), r.__dict__.get("jobKind"))
        for r in caplog.records
        if r.levelname == "ERROR"
    ]
    assert errors == [("malformed job message", "m-malformed", None), ("job failed", "m-failing", "compact")]
    assert "sk-very-secret" not in str([r.__dict__ for r in caplog.records])


async def test_a_malformed_body_stays_out_of_the_batch_processors_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    async def handle(job: Job) -> None:
        raise AssertionError("a malformed record never reaches a handler")

    caplog.set_level("DEBUG")
    event = {"Records": [_sqs_record('{"kind": "compact", "api_key": "sk-very-secret"', "m-malformed")]}
    assert await process_batch(event, handle) == {"batchItemFailures": [{"itemIdentifier": "m-malformed"}]}
    assert any(r.name.startswith("aws_lambda_powertools") for r in caplog.records)  # the processor did log it
    assert "sk-very-secret" not in str([(r.getMessage(), r.__dict__) for r in caplog.records])


async def test_when_every_record_fails_all_are_reported_without_raising() -> None:
    async def handle(job: Job) -> None:
        raise ValueError("down")

    records = [_sqs_record(dump_job(_compact(f"c_{n}")), f"m-{n}") for n in range(3)]
    records.append(_sqs_record("not json", "m-junk"))
    response = await process_batch({"Records": records}, handle)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": f"m-{n}"} for n in (0, 1, 2)] + [{"itemIdentifier": "m-junk"}]
    }


async def test_records_of_a_batch_run_concurrently_within_the_bound() -> None:
    running, peak = 0, 0
    full = asyncio.Event()

    async def handle(job: Job) -> None:
        # Each record holds its slot until the bound's worth run together (a batch that ran them one at a
        # time would never get there: the bounded wait below fails it). They are let go by a callback queued
        # behind every record the batch has already started (the loop runs callbacks in order), so a batch
        # over its bound shows it here.
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 4:
            asyncio.get_running_loop().call_soon(full.set)
        await full.wait()
        running -= 1

    records = [_sqs_record(dump_job(_compact(f"c_{n}")), f"m-{n}") for n in range(10)]
    async with asyncio.timeout(30):
        assert await process_batch({"Records": records}, handle) == {"batchItemFailures": []}
    assert peak == 4


# --- the Lambda functions on moto -----------------------------------------------------------------


@pytest.fixture
def lambda_env(queue_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_LAMBDA_FUNCTION_NAME": "agent-core-worker",
        "AGENT_TABLE_NAME": "agent-core-test",
        "AGENT_DATA_BUCKET": "agent-core-test-data",
        "AGENT_WORK_QUEUE_URL": queue_url,
        "AGENT_LLM_PROVIDER": "offline",
        "AGENT_MEMORY_WINDOW": "2",
        "AGENT_MEMORY_COMPACT_AFTER": "4",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    entry.use(None)
    ensure_resources(
        get_settings(), boto3.client("dynamodb", region_name=REGION), boto3.client("s3", region_name=REGION)
    )
    yield
    entry.use(None)
    get_settings.cache_clear()


async def _seed_chat(ctx: AppContext, chat_id: str, messages: int) -> None:
    await ctx.deps.chats.create_chat(Chat(chat_id=chat_id, user_id="u1", created_at=1, last_activity_at=1))
    await ctx.deps.chats.add_messages(
        chat_id,
        [
            Message(
                id=f"{n:013d}",
                chat_id=chat_id,
                role=Role.USER if n % 2 == 0 else Role.ASSISTANT,
                content=f"m{n}",
                created_at=n,
            )
            for n in range(messages)
        ],
    )


def test_worker_handler_compacts_a_chat_from_a_real_sqs_batch(lambda_env: None, queue_url: str) -> None:
    from functions.worker.handler import handler

    ctx = entry.lambda_context()
    assert ctx.settings.in_lambda and ctx.settings.effective_storage == "aws"
    entry.run(_seed_chat(ctx, "c_long", 7))
    queue = SqsWorkQueue(queue_url, lambda: boto3.client("sqs", region_name=REGION))
    entry.run(queue.enqueue_many([_compact("c_long"), _compact("c_short_missing")]))
    event = _event_from(_receive_all(queue_url))
    event["Records"].append(_sqs_record('{"kind": "nope"}', "m-unknown-kind"))
    response = handler(event, FakeLambdaContext(function_name="agent-core-worker"))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-unknown-kind"}]}
    summary = entry.run(ctx.deps.memory_store.get_summary("c_long"))
    assert summary is not None and summary.covered_count == 5  # all but the last window of 2
    assert entry.run(ctx.deps.memory_store.get_summary("c_short_missing")) is None


class RecordedPasses(list[tuple[str, datetime, RunDeps]]):
    """Scheduled passes standing in for the real ones (their internals are elsewhere): each records its name,
    `now` and deps, and enqueues one job. `schedules` is the map a context is built with."""

    def __init__(self) -> None:
        super().__init__()
        self.users: list[str | None] = []  # the user a pass was limited to (the dev routes), else None
        names: list[ScheduledJob] = ["idle_sessions", "daily_summary"]
        self.schedules: dict[ScheduledJob, ScheduledPass] = {name: self._fake(name) for name in names}

    def _fake(self, name: str) -> ScheduledPass:
        async def run(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
            self.append((name, now, deps))
            self.users.append(user_id)
            await deps.work_queue.enqueue(_compact(f"c_{name}"))
            return JobReport(scanned=3, enqueued=1, skipped=2, details={"closed": 1})

        return run


@pytest.fixture
def recorded_now() -> RecordedPasses:
    return RecordedPasses()


def _lambda_context_with(recorded: RecordedPasses) -> AppContext:
    """The Lambda process's context, as the environment wires it, with the recording passes."""
    ctx = build_context(get_settings(), schedules=recorded.schedules)
    entry.use(ctx)
    return ctx


@pytest.mark.parametrize("name", ["idle_sessions", "daily_summary"])
def test_scheduled_handlers_use_the_schedulers_time_and_return_the_report(
    lambda_env: None, queue_url: str, recorded_now: RecordedPasses, name: str
) -> None:
    _lambda_context_with(recorded_now)
    module = __import__(f"functions.{name}.handler", fromlist=["handler"])
    context = FakeLambdaContext(function_name=f"agent-core-{name}")
    report = module.handler(SCHEDULER_INPUT, context)
    assert report == {
        "scanned": 3,
        "enqueued": 1,
        "skipped": 2,
        "details": {"closed": 1},
        "summarised": 0,
        "failed": 0,
        "job_run_id": "",
    }
    assert recorded_now[-1][:2] == (name, SCHEDULED_AT)
    assert recorded_now[-1][2] is entry.lambda_context().deps
    # In Lambda with a queue URL the enqueued work goes to SQS for the worker, not into this function
    assert isinstance(entry.lambda_context().deps.work_queue, SqsWorkQueue)
    assert [json.loads(m["Body"])["chat_id"] for m in _receive_all(queue_url)] == [f"c_{name}"]
    before = datetime.now(UTC)
    module.handler({}, context)  # no scheduledTime (a manual invoke): the current time
    assert before - timedelta(seconds=1) <= recorded_now[-1][1] <= datetime.now(UTC)


def test_scheduled_work_goes_through_sqs_to_the_worker(
    lambda_env: None, queue_url: str, recorded_now: RecordedPasses
) -> None:
    from functions.daily_summary.handler import handler as daily_summary
    from functions.worker.handler import handler as worker

    ctx = _lambda_context_with(recorded_now)
    if not isinstance(ctx.deps.work_queue, SqsWorkQueue):  # as context.py wires it in Lambda with a queue URL
        ctx.deps.work_queue = SqsWorkQueue(queue_url, lambda: boto3.client("sqs", region_name=REGION))
    entry.run(_seed_chat(ctx, "c_daily_summary", 7))
    daily_summary(SCHEDULER_INPUT, FakeLambdaContext(function_name="agent-core-daily_summary"))
    assert ctx.background.completed == 0  # nothing ran in the scheduled function itself
    messages = _receive_all(queue_url)
    assert [json.loads(m["Body"])["chat_id"] for m in messages] == ["c_daily_summary"]
    assert worker(_event_from(messages), FakeLambdaContext(function_name="agent-core-worker")) == {
        "batchItemFailures": []
    }
    assert entry.run(ctx.deps.memory_store.get_summary("c_daily_summary")) is not None


# --- dev routes -----------------------------------------------------------------------------------


class HandledJobs(list[Job]):
    """A recorder standing in for every job's handler, in the contexts `watch` returns. A job ends (and is
    recorded) only once something waits for the in-process queue: a job seen here was waited for."""

    def __init__(self) -> None:
        super().__init__()
        self._joined: asyncio.Event | None = None

    def watch(self, ctx: AppContext) -> AppContext:
        joined = self._joined = asyncio.Event()
        join = ctx.background.join

        async def waited_for() -> None:
            joined.set()
            await join()

        ctx.background.join = waited_for  # type: ignore[method-assign]
        return ctx

    def context(self, settings: Settings, **kwargs: Any) -> AppContext:
        return self.watch(build_context(settings, job_handlers=dict.fromkeys(JOB_HANDLERS, self._record), **kwargs))

    async def _record(self, deps: RunDeps, job: Job) -> bool:
        assert self._joined is not None
        await self._joined.wait()
        self.append(job)
        return True  # as a handler that wrote its summary


@pytest.fixture
def handled() -> HandledJobs:
    return HandledJobs()


def _dev_client(ctx: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.mark.parametrize(("path", "name"), [("idle-sessions", "idle_sessions"), ("daily-summary", "daily_summary")])
async def test_dev_routes_run_the_job_at_x_agent_now_and_wait_for_its_work(
    recorded_now: RecordedPasses, handled: HandledJobs, path: str, name: str
) -> None:
    settings = make_settings(AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true")
    ctx = handled.context(settings, table=MemoryTable(), schedules=recorded_now.schedules)
    async with _dev_client(ctx) as client:
        answer = await client.post(f"/api/dev/jobs/{path}", headers={"X-Agent-Now": "2026-01-08T16:30:00+00:00"})
    assert answer.status_code == 200
    assert answer.json() == {
        "job": name,
        "now": "2026-01-08T16:30:00+00:00",
        "report": {
            "scanned": 3,
            "enqueued": 1,
            "skipped": 2,
            "details": {"closed": 1},
            "summarised": 1,  # the summary the enqueued job wrote: what the waiting was for
            "failed": 0,
            "job_run_id": "",
        },
    }
    assert recorded_now == [(name, SCHEDULED_AT, ctx.deps)]
    assert handled == [_compact(f"c_{name}")]  # the enqueued job had finished when the answer came


async def test_dev_routes_answer_404_in_lambda_and_only_the_local_group_has_them(
    recorded_now: RecordedPasses,
) -> None:
    settings = make_settings(AWS_LAMBDA_FUNCTION_NAME="agent-core-chat")
    ctx = build_context(settings, table=MemoryTable(), schedules=recorded_now.schedules)
    async with _dev_client(ctx) as client:
        answer = await client.post("/api/dev/jobs/idle-sessions")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert recorded_now == []
    lambda_groups = (routes.chat, routes.stream_routes, routes.submit_routes, routes.data_routes)
    paths = [route.path for group in lambda_groups for router in group for route in router.routes]  # type: ignore[attr-defined]
    assert paths and not [p for p in paths if p.startswith("/api/dev")]


# --- the CLI --------------------------------------------------------------------------------------


def _clean_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    return env | overrides


@pytest.mark.parametrize("storage", ["memory"])
def test_cli_jobs_refuse_a_store_that_lives_only_in_this_process_and_say_why(storage: str) -> None:
    """A fresh in-process store is empty: the pass would report `scanned: 0` without looking at any data."""
    out = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "idle-sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(AGENT_STORAGE=storage, AGENT_LLM_PROVIDER="offline"),
    )
    assert out.returncode == 2
    assert out.stdout == "", "no report of a pass that saw nothing"
    (line,) = out.stderr.strip().splitlines()
    assert f"AGENT_STORAGE={storage} keeps its data inside the process that opened it" in line
    assert "/api/dev/jobs/idle-sessions" in line and "AGENT_STORAGE=aws" in line


@pytest.mark.parametrize(
    ("aws", "says"),
    [
        ({}, "Unable to locate credentials"),  # no credentials anywhere
        (  # credentials, but no DynamoDB where they point
            {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
            "storage is unavailable",
        ),
    ],
)
def test_cli_jobs_on_aws_storage_it_cannot_reach_says_so_in_one_line(aws: dict[str, str], says: str) -> None:
    """`AGENT_STORAGE=aws agent-core jobs ...` without credentials once ended in a botocore traceback."""
    nowhere = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}
    env = _clean_env(AGENT_STORAGE="aws", AGENT_LLM_PROVIDER="offline", AGENT_STORE_WRITE_ATTEMPTS="1", **nowhere)
    env |= {"AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1", **aws}
    out = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "idle-sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 1
    assert out.stdout == "", "no report of a pass that could not read anything"
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("agent-core jobs: AGENT_STORAGE=aws: the table agent-core-local could not be read")
    assert says in last and "AGENT_TABLE_NAME" in last


def test_cli_jobs_idle_sessions_runs_the_real_pass_on_embedded_storage(tmp_path: Path) -> None:
    """The embedded store is a database on disk: the command sees what the local server wrote."""
    out = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "idle-sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(AGENT_STORAGE="embedded", AGENT_LLM_PROVIDER="offline", AGENT_DATA_DIR=str(tmp_path)),
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["job"] == "idle_sessions" and report["failed"] == 0
    # A directory with no database yet (run from elsewhere, or a mistyped AGENT_DATA_DIR) is said so, once:
    # the pass over the new, empty database finds nothing, which alone reads as "nothing was due"
    notes = [line for line in out.stderr.splitlines() if line.startswith("agent-core jobs:")]
    assert notes == [
        f"agent-core jobs: no database in {tmp_path} yet: this pass starts an empty one. The local server "
        "keeps its data in .agent-core under the directory it was started from (or AGENT_DATA_DIR)."
    ]
    again = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "idle-sessions"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(AGENT_STORAGE="embedded", AGENT_LLM_PROVIDER="offline", AGENT_DATA_DIR=str(tmp_path)),
    )
    assert again.returncode == 0 and "agent-core jobs:" not in again.stderr


def test_cli_jobs_idle_sessions_runs_the_real_pass_on_a_dynamodb_table(
    cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_core.cli import main

    assert main(["jobs", "idle-sessions"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()  # the logs go to standard error
    report = json.loads(line)
    assert report["job"] == "idle_sessions" and report["failed"] == 0
    assert {"scanned", "enqueued", "skipped", "details"} <= report["report"].keys()


def test_cli_jobs_waits_for_the_work_the_pass_enqueued(cli_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A pass that enqueues a CompactJob, which then really runs (offline model) against the table."""
    from agent_core.cli import main

    async def fake(deps: RunDeps, now: datetime, user_id: str | None = None) -> JobReport:
        await deps.work_queue.enqueue(CompactJob(chat_id="c_none", model="m"))
        return JobReport(scanned=1, enqueued=1, details={"now": int(now.timestamp())})

    def build(settings: Settings) -> AppContext:
        return build_context(settings, schedules={"idle_sessions": fake})

    assert main(["jobs", "idle-sessions", "--now", "2026-01-08T16:30:00Z"], build=build) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {
        "job": "idle_sessions",
        "now": "2026-01-08T16:30:00+00:00",
        "report": {
            "scanned": 1,
            "enqueued": 1,
            "skipped": 0,
            "details": {"now": int(SCHEDULED_AT.timestamp())},
            "summarised": 0,
            "failed": 0,
            "job_run_id": "",
        },
        "completed": 1,
        "failed": 0,
    }


def test_cli_help_lists_the_jobs_and_says_backfill_needs_a_user() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "jobs", "backfill", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(),
    )
    assert out.returncode == 0
    assert "--user is required" in out.stdout and "idle-sessions" in out.stdout


@pytest.fixture
def cli_env(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI against a DynamoDB table (moto): `jobs` refuses storage that lives inside one process."""
    for name in [k for k in os.environ if k.startswith(("AGENT_", "OPENAI_", "AWS_LAMBDA"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AGENT_STORAGE", "aws")
    monkeypatch.setenv("AGENT_LLM_PROVIDER", "offline")
    get_settings.cache_clear()
    ensure_resources(
        get_settings(), boto3.client("dynamodb", region_name=REGION), boto3.client("s3", region_name=REGION)
    )
    yield
    get_settings.cache_clear()


def test_cli_backfill_enqueues_one_job_per_date_with_a_progress_bar(
    cli_env: None, handled: HandledJobs, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_core.cli import main

    def build(settings: Settings) -> AppContext:
        return handled.context(settings)

    argv = ["jobs", "backfill", "--since", "2026-01-06", "--until", "2026-01-08", "--user", "u1"]
    code = main(argv, build=build)
    assert code == 0
    assert handled == [DailySummaryJob(user_id="u1", date=f"2026-01-0{d}") for d in (6, 7, 8)]
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "job": "backfill",
        "user": "u1",
        "since": "2026-01-06",
        "until": "2026-01-08",
        "enqueued": 3,
        "completed": 3,
        "failed": 0,
    }
    assert "3/3 2026-01-08" in err and "#" * 30 in err


def test_cli_daily_summary_for_a_date_and_user_or_at_the_end_of_a_date(
    cli_env: None,
    handled: HandledJobs,
    recorded_now: RecordedPasses,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_core.cli import main

    def build(settings: Settings) -> AppContext:
        return handled.context(settings, schedules=recorded_now.schedules)

    argv = ["jobs", "daily-summary", "--date", "2026-01-08", "--user", "u1", "--now", "2026-01-09T01:00:00Z"]
    assert main(argv, build=build) == 0
    assert handled[0] == DailySummaryJob(user_id="u1", date="2026-01-08", now_ms=1767920400000)
    assert main(["jobs", "daily-summary", "--date", "2026-01-08"], build=build) == 0
    # The end of 2026-01-08 in AGENT_DEFAULT_TIMEZONE (Asia/Shanghai, UTC+8) is 16:00 UTC; one hour later:
    assert recorded_now[-1][:2] == ("daily_summary", datetime(2026, 1, 8, 17, 0, tzinfo=UTC))
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["job"] for r in reports] == ["daily_summary", "daily_summary"]
    assert reports[0]["enqueued"] == 1 and reports[1]["now"] == "2026-01-08T17:00:00+00:00"


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "backfill", "--since", "2026-01-01"],
        ["jobs", "daily-summary", "--user", "u1"],
        ["jobs", "backfill", "--since", "2026-01-09", "--until", "2026-01-08", "--user", "u1"],
        ["jobs", "idle-sessions", "--now", "yesterday"],
        ["jobs", "daily-summary", "--force"],
    ],
)
def test_cli_refuses_incomplete_arguments(cli_env: None, argv: list[str]) -> None:
    from agent_core.cli import main

    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2


def _active_user(at: datetime, user: str = "u1") -> None:
    """`user` wrote in a chat at `at` (the table the CLI reads)."""
    from agent_core.memory.calendar import to_ms

    ctx = build_context(get_settings())
    ms = to_ms(at)
    chat = Chat(chat_id=f"c_{user}", user_id=user, created_at=ms, last_activity_at=ms)
    asyncio.run(ctx.deps.chats.create_chat(chat))


def test_cli_daily_summary_for_an_active_user_refuses_at_once_and_says_why(
    cli_env: None, handled: HandledJobs, capsys: pytest.CaptureFixture[str]
) -> None:
    """No silent 10-minute wait: the reason on stderr, exit 3, nothing enqueued."""
    from agent_core.cli import main

    _active_user(datetime(2026, 1, 9, 0, 55, tzinfo=UTC))

    def build(settings: Settings) -> AppContext:
        return handled.context(settings)

    argv = ["jobs", "daily-summary", "--date", "2026-01-08", "--user", "u1", "--now", "2026-01-09T01:00:00Z"]
    assert main(argv, build=build) == 3
    out, err = capsys.readouterr()
    assert out == "" and handled == []
    assert "'u1' was active at 2026-01-09T00:55:00+00:00" in err and "--force" in err
    assert "Run it again after 2026-01-09T01:05:00+00:00" in err
    # backfill runs at the current time: a user active a moment ago is refused the same way
    _active_user(datetime.now(UTC), "u2")
    backfill = ["jobs", "backfill", "--since", "2026-01-07", "--until", "2026-01-08", "--user", "u2"]
    assert main(backfill, build=build) == 3 and handled == []
    assert "'u2' was active at" in capsys.readouterr().err
    # Later, when u1 has been quiet for 10 minutes, the same command runs
    later = ["jobs", "daily-summary", "--date", "2026-01-08", "--user", "u1", "--now", "2026-01-09T01:06:00Z"]
    assert main(later, build=build) == 0 and handled[0].deferrals == 0  # type: ignore[attr-defined]


def test_cli_daily_summary_force_summarises_an_active_users_day_now(
    cli_env: None, handled: HandledJobs, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_core.cli import main
    from agent_core.jobs.daily import MAX_DEFERRALS

    _active_user(datetime(2026, 1, 9, 0, 55, tzinfo=UTC))

    def build(settings: Settings) -> AppContext:
        return handled.context(settings)

    argv = ["jobs", "daily-summary", "--date", "2026-01-08", "--user", "u1", "--now", "2026-01-09T01:00:00Z"]
    assert main([*argv, "--force"], build=build) == 0
    assert len(handled) == 1 and handled[0].deferrals == MAX_DEFERRALS  # type: ignore[attr-defined]
    assert json.loads(capsys.readouterr().out)["completed"] == 1


async def test_a_forced_daily_summary_is_written_while_the_user_is_active() -> None:
    """What --force enqueues: the job summarises now instead of deferring itself."""
    from agent_core.domain.ids import sortable_id
    from agent_core.jobs.daily import forced, summarize_day
    from agent_core.memory.calendar import to_ms

    ctx = build_context(make_settings(AGENT_DEFAULT_TIMEZONE="UTC"), table=MemoryTable(), audit=lambda _: None)
    at = to_ms(datetime(2026, 1, 8, 23, 55, tzinfo=UTC))
    chat = Chat(chat_id="c1", user_id="u1", created_at=at, last_activity_at=at)
    await ctx.deps.chats.create_chat(chat)
    message = Message(id=sortable_id(at), chat_id="c1", role=Role.USER, content="我头疼", created_at=at)
    await ctx.deps.chats.add_messages("c1", [message])
    job = DailySummaryJob(user_id="u1", date="2026-01-08", now_ms=at + 60_000)
    assert await summarize_day(ctx.deps, forced(job)) is True
    days = await ctx.deps.memory_store.daily_range("u1", "2026-01-08", "2026-01-08")
    assert len(days) == 1 and "我头疼" in days[0].summary
