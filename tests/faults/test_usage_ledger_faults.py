"""A lasting storage fault on a run's usage-ledger write does not lose the record, and it lands exactly once.

The run's record is written in its own process after the answer (a `UsageJob` on the in-process queue); when
that write still fails after its retries, the record is handed to the work queue: SQS in Lambda (the worker
writes it; while the fault lasts the worker fails the message and SQS redelivers it), the in-process queue
(journalled) locally. However often it is written, retried, handed off or redelivered, the ledger counts the
run once: its `USAGEMARK#run:{runId}` marker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from agent_core.domain.jobs import UsageJob, parse_job
from agent_core.domain.models import Run
from agent_core.jobs import usage as usage_jobs
from agent_core.jobs.worker import process_batch
from tests.faults.harness import Harness, build_harness
from tests.support.faults import Call, FaultPlan, _cancellation, _response
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript

WRITE_ATTEMPTS = 5  # AGENT_STORE_WRITE_ATTEMPTS' default
QUESTION = "what is the time in Tokyo?"
ANSWER = "It is late there."


class LedgerFault(FaultPlan):
    """Fails the first `times` usage-ledger writes (a transaction that puts a USAGEMARK item), and no other call:
    `throttle` answers each with a throttled transaction, `lost_response` lets it commit and loses its answer."""

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        params = context.get("fault_api_params", {})
        ledger = model.name == "TransactWriteItems" and "USAGEMARK#" in str(params.get("TransactItems"))
        if not ledger or len(self.injected) >= self.times:
            return None
        self.injected.append(Call("dynamodb", model.name))
        if self.kind == "lost_response":
            context["fault_lost_response"] = True
            return None
        reasons = ["ThrottlingError"] + ["None"] * (len(params["TransactItems"]) - 1)
        return _response(400, _cancellation(reasons))


@pytest.fixture
def queue_url(aws_env: None) -> str:
    return str(boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="agent-core-jobs")["QueueUrl"])


@pytest.fixture
async def lambda_harness(aws_env: None, openai_stub: OpenAiStub, queue_url: str) -> AsyncIterator[Harness]:
    """The harness as a Lambda function runs it: background work goes to SQS (moto's). A handed-off record is
    queued 0 s later here (AGENT_USAGE_HANDOFF_DELAY_S, set by the harness; the delays: test_hand_off_delays)."""
    h = build_harness(openai_stub, AWS_LAMBDA_FUNCTION_NAME="agent-core-stream", AGENT_WORK_QUEUE_URL=queue_url)
    assert h.context.deps.work_queue is not h.context.deps.in_process
    async with h.client:
        yield h


@pytest.fixture
async def local_harness(aws_env: None, openai_stub: OpenAiStub) -> AsyncIterator[Harness]:
    h = build_harness(openai_stub)
    assert h.context.deps.work_queue is h.context.deps.in_process
    async with h.client:
        yield h


async def _turn(h: Harness) -> str:
    """One completed turn; returns its run id."""
    chat_id = await h.new_chat()
    h.stub.enqueue(StubScript.text(ANSWER))
    seen = await h.query(chat_id, QUESTION, f"req-{chat_id}")
    assert seen.terminal is not None and seen.terminal["type"] == "run.complete", seen.terminal
    return str(seen.terminal["runId"])


async def _run(h: Harness, run_id: str) -> Run:
    pointer = await h.store.get_run_pointer(run_id, 0)
    assert pointer is not None
    run = await h.store.get_run(pointer.chat_id, run_id)
    assert run is not None and run.usage.prompt_tokens > 0
    return run


async def _ledger(h: Harness) -> list[tuple[int, int, int]]:
    """(runs, input tokens, output tokens) of the user's ledger rows today."""
    meter = h.context.deps.usage
    assert meter is not None
    today = datetime.now(UTC).date().isoformat()
    return [(r.runs, r.input_tokens, r.output_tokens) for r in await meter.ledger.rows("alice", today, today)]


def _receive(queue_url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])
    return list(answer.get("Messages", []))


def _event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": m["MessageId"], "body": m["Body"], "attributes": m["Attributes"], "eventSource": "aws:sqs"}
            for m in messages
        ]
    }


async def test_in_lambda_the_record_goes_to_sqs_and_lands_once_under_redelivery(
    lambda_harness: Harness, queue_url: str
) -> None:
    h = lambda_harness
    # Given a ledger write that fails for good (every retry of it) while the run ends
    plan = h.inject(LedgerFault(kind="throttle", times=2 * WRITE_ATTEMPTS))
    run_id = await _turn(h)
    # Then the user had the answer, the ledger has nothing yet, and the record is a message on the work queue
    assert len(plan.injected) == WRITE_ATTEMPTS and await _ledger(h) == []
    [message] = _receive(queue_url)
    job = parse_job(message["Body"])
    assert isinstance(job, UsageJob) and (job.marker, job.handoffs, job.runs) == (f"run:{run_id}", 1, 1)
    # When the worker runs it while the fault lasts, it fails the message: SQS's redrive brings it back
    failed = await process_batch(_event([message]), h.context.jobs)
    assert failed == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    assert len(plan.injected) == 2 * WRITE_ATTEMPTS and await _ledger(h) == []
    assert _receive(queue_url) == []  # the worker queued nothing more: redelivery is SQS's
    # When storage is back and SQS delivers it again, twice (a redelivery of a message already processed)
    h.heal()
    for _ in range(2):
        assert await process_batch(_event([message]), h.context.jobs) == {"batchItemFailures": []}
    # Then the run is in the ledger exactly once
    run = await _run(h, run_id)
    assert await _ledger(h) == [(1, run.usage.prompt_tokens, run.usage.completion_tokens)]


@pytest.mark.parametrize("kind", ["throttle", "lost_response"])
async def test_locally_the_record_is_queued_again_and_lands_once(local_harness: Harness, kind: str) -> None:
    h = local_harness
    # Given the first write and its first hand-off failing for good; `lost_response`: every attempt commits
    # and its answer is lost, so the ledger already holds the run when the retries give up
    h.inject(LedgerFault(kind=kind, times=2 * WRITE_ATTEMPTS))
    run_id = await _turn(h)
    # Then the record was written (and handed off) until it landed, and the ledger counts the run once
    assert h.context.background.failed == 0
    run = await _run(h, run_id)
    assert await _ledger(h) == [(1, run.usage.prompt_tokens, run.usage.completion_tokens)]


async def test_hand_off_delays() -> None:
    class Recording:
        def __init__(self) -> None:
            self.sent: list[tuple[int, int]] = []

        async def enqueue(self, job: UsageJob, delay_s: int = 0) -> None:
            self.sent.append((job.handoffs, delay_s))

    settings = make_settings()
    deps: Any = type("Deps", (), {"work_queue": Recording(), "in_process": object(), "settings": settings})()
    job = UsageJob(user_id="u", day="2026-11-26", model="m", marker="run:r", runs=1, usage={"prompt_tokens": 1})
    # The run's own write hands off once, 30 s later; the worker's failures are SQS's to redeliver
    assert await usage_jobs._hand_off(deps, job)
    assert deps.work_queue.sent == [(1, 30)]
    assert not await usage_jobs._hand_off(deps, job.model_copy(update={"handoffs": 1}))
    # Locally (the work queue is this process's): 30, 60, 120, ... s, at most 900, at most 8 times
    deps.in_process = deps.work_queue
    delays = []
    for handoffs in range(10):
        if await usage_jobs._hand_off(deps, job.model_copy(update={"handoffs": handoffs})):
            delays.append(deps.work_queue.sent[-1][1])
    assert delays == [30, 60, 120, 240, 480, 900, 900, 900]
