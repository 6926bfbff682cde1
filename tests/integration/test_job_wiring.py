"""How jobs are wired: one {job type: handler} map for both queues, and where routes wait for background work."""

from __future__ import annotations

import ast
import asyncio
from typing import get_args

import pytest

from agent_core.container import RunDeps
from agent_core.context import build_context
from agent_core.domain.jobs import CompactJob, Job, ProfileJob, dump_job
from agent_core.jobs.handlers import UnknownJob
from agent_core.jobs.inprocess import InProcessWorkQueue
from agent_core.jobs.worker import process_batch
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.lambda_events import sqs_record
from tests.unit.test_import_graph import MODULES, _targets, _tree

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:agent-core-work"


def test_jobs_import_neither_the_composition_root_nor_what_enters_the_app() -> None:
    """`jobs/` holds queues and job bodies: the context, the Lambda glue, the CLI and the routes import it, never
    the reverse (function-level imports included)."""
    above = {"agent_core.context", "agent_core.lambda_entry", "agent_core.cli"}
    found = []
    for module in (m for m in MODULES if m.startswith("agent_core.jobs.")):
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += [(module, t) for t in _targets(node) if t in above or t.startswith("agent_core.api")]
    assert found == []


def test_every_job_type_has_a_handler_in_the_apps_map() -> None:
    ctx = build_context(make_settings(), table=MemoryTable())
    job_types = get_args(get_args(Job)[0])  # Job is Annotated[A | B | ..., discriminator]
    assert job_types and set(job_types) == set(ctx.jobs.handlers)
    assert ctx.jobs.deps is ctx.deps


async def test_the_in_process_queue_and_the_worker_run_the_same_map() -> None:
    ran: list[tuple[str, Job]] = []

    async def compact(deps: RunDeps, job: CompactJob) -> bool:
        ran.append(("compact", job))
        return True

    ctx = build_context(make_settings(), table=MemoryTable(), job_handlers={CompactJob: compact})
    local, queued = CompactJob(chat_id="c_local", model="m"), CompactJob(chat_id="c_sqs", model="m")
    await ctx.deps.work_queue.enqueue(local)
    await ctx.background.join()
    event = {"Records": [sqs_record(dump_job(queued), "m-1", QUEUE_ARN)]}
    assert await process_batch(event, ctx.jobs) == {"batchItemFailures": []}
    # (a job sent while another test's tracer provider is installed carries its trace context: not compared)
    untraced = [(kind, job.model_copy(update={"traceparent": "", "tracestate": ""})) for kind, job in ran]
    assert untraced == [("compact", local), ("compact", queued)]


async def test_a_job_without_a_handler_fails_so_it_is_redelivered_never_dropped() -> None:
    ctx = build_context(make_settings(), table=MemoryTable(), job_handlers={})
    job = ProfileJob(chat_id="c_1", user_id="u1", session_id="s1")
    with pytest.raises(UnknownJob, match="profile"):
        await ctx.jobs(job)
    event = {"Records": [sqs_record(dump_job(job), "m-1", QUEUE_ARN)]}
    assert await process_batch(event, ctx.jobs) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


@pytest.mark.parametrize("in_lambda", [True, False], ids=["lambda", "local"])
async def test_before_response_waits_for_background_work_only_in_lambda(
    in_lambda: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that can only end once something waits for the queue (join), so that a route which returns
    # with the job done must have waited for it, and one which did not wait returns with the job still running
    joined, done = asyncio.Event(), asyncio.Event()

    async def needs_a_waiter(deps: RunDeps, job: CompactJob) -> bool:
        await joined.wait()
        done.set()
        return True

    env = {"AWS_LAMBDA_FUNCTION_NAME": "agent-core-chat"} if in_lambda else {}
    ctx = build_context(make_settings(**env), table=MemoryTable(), job_handlers={CompactJob: needs_a_waiter})
    assert ctx.deps.work_queue is ctx.background  # no queue URL: the in-process queue, in Lambda too
    join = ctx.background.join

    async def waited_for() -> None:
        joined.set()
        await join()

    monkeypatch.setattr(ctx.background, "join", waited_for)
    await ctx.deps.work_queue.enqueue(CompactJob(chat_id="c_1", model="m"))
    # When the route's response is about to end (bounded: a wait that never ends fails here)
    async with asyncio.timeout(30):
        await ctx.before_response()
    # Then in Lambda the job had finished; elsewhere the response went without waiting and the job runs on
    assert (joined.is_set(), done.is_set()) == (in_lambda, in_lambda)
    await ctx.background.join()
    assert done.is_set()


async def test_the_in_process_queue_refuses_a_job_before_it_has_a_handler() -> None:
    queue = InProcessWorkQueue()
    with pytest.raises(RuntimeError, match="serve"):
        await queue.enqueue(CompactJob(chat_id="c_1", model="m"))
