"""Storage faults at every DynamoDB/S3 call of a turn, in turn: throttling, 5xx, timeouts, lost answers of
committed writes, transaction conflicts and condition failures, once or for a write's whole retry budget.

The turn: a tool call, then an answer large enough (300 KB) that its message and the run's replay
snapshot go to S3 before the final transaction, so the S3 calls are part of it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_core.domain.models import Role
from tests.faults.harness import Harness, check_turn
from tests.support.faults import KINDS_BY_SERVICE, WRITES, Call, FaultPlan, applies
from tests.support.openai_stub import StubScript

ANSWER = "".join(f"line {i:05d} of a long answer.\n" for i in range(11_000))  # ~300 KB
QUESTION = "explain it all, at length"
WRITE_ATTEMPTS = 5  # AGENT_STORE_WRITE_ATTEMPTS' default: a lasting fault outlives every retry

# The calls of one such turn, in order (the cancel watch's timing-dependent polls aside).
TURN_CALLS = [
    Call("dynamodb", "BatchGetItem"),  # chat, rolling summary, profile, memory records version
    Call("dynamodb", "GetItem"),  # the user's LIMITS item (the budget check; cached per process afterwards)
    Call("dynamodb", "TransactWriteItems"),  # request marker, lease, USER message, RUN item, pointer
    Call("dynamodb", "Query"),  # the uncovered history
    Call("s3", "PutObject"),  # spilled: the answer message's content
    Call("s3", "PutObject"),  # spilled: the run's replay snapshot
    Call("dynamodb", "TransactWriteItems"),  # messages, RUN record, lease release
    Call("dynamodb", "TransactWriteItems"),  # the usage ledger (UsageJob, once per run, after the answer)
]
LEDGER_WRITE = len(TURN_CALLS)
BEFORE_STREAM = 4  # the first four calls prepare the turn: a failure there is an HTTP error, later a run.error

CASES = [
    pytest.param(at, kind, times, id=f"{at}-{call}-{kind}-{'once' if times == 1 else 'lasting'}")
    for at, call in enumerate(TURN_CALLS, start=1)
    for kind in KINDS_BY_SERVICE[call.service]
    if applies(kind, call.service, call.operation)
    for times in (1, WRITE_ATTEMPTS)
]


def _script(harness: Harness) -> None:
    harness.stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}]),
        StubScript.text(*[ANSWER[i : i + 20_000] for i in range(0, len(ANSWER), 20_000)]),
    )


async def test_a_turn_makes_exactly_these_storage_calls(harness: Harness) -> None:
    chat_id = await harness.new_chat()
    _script(harness)
    plan = harness.inject(FaultPlan())
    seen = await harness.query(chat_id, QUESTION, "req-clean")
    assert plan.calls == TURN_CALLS, [str(c) for c in plan.calls]
    # Beside them, the run's event log: a PutItem per batch (the 300 KB answer: several, under the item limit)
    assert len(plan.log_writes) >= 2 and set(plan.log_writes) == {Call("dynamodb", "PutItem")}
    assert await check_turn(harness, chat_id, QUESTION, ANSWER, seen) == "run.complete"


@pytest.mark.parametrize("kind", ["throttle", "server_error", "timeout"])
async def test_a_failing_event_log_leaves_the_turn_whole_and_resume_says_so(harness: Harness, kind: str) -> None:
    # Given every write of the run's event log failing
    chat_id = await harness.new_chat()
    _script(harness)
    plan = harness.inject(FaultPlan(log_kind=kind))
    # When a turn streams, Then the client gets the whole answer and everything is stored as usual
    seen = await harness.query(chat_id, QUESTION, f"req-log-{kind}")
    assert plan.log_writes, "the log was not written to"
    assert await check_turn(harness, chat_id, QUESTION, ANSWER, seen) == "run.complete"
    # And resuming the run mid-stream is refused with a stable code (its replay still shows it)
    run_id = seen.events[0]["runId"]
    cut = await harness.client.get(f"/api/ap/runs/{run_id}/events", params={"after": 3})
    assert cut.status_code == 410 and cut.json()["error"]["code"] == "resume_unavailable"


@pytest.mark.parametrize(("at", "kind", "times"), CASES)
async def test_storage_fault_at_every_call(harness: Harness, at: int, kind: str, times: int) -> None:
    chat_id = await harness.new_chat()
    _script(harness)
    plan = harness.inject(FaultPlan(kind=kind, at=at, times=times))
    seen = await harness.query(chat_id, QUESTION, f"req-{at}-{kind}")
    assert plan.injected, "the fault was not injected"
    outcome = await check_turn(harness, chat_id, QUESTION, ANSWER, seen)
    call = TURN_CALLS[at - 1]
    if at == LEDGER_WRITE:
        # The ledger write is a job queued after the answer is stored: even a lasting fault there is not the user's,
        # and the record is not lost: handed to the work queue, it lands once (tests/faults/test_usage_ledger_faults.py)
        assert outcome == "run.complete", outcome
        # (A condition failure there is injected on the budget item, which has no condition: not a fault
        # DynamoDB can give; the record is then dropped, logged as a failed job.)
        if kind != "conditional":
            today = datetime.now(UTC).date().isoformat()
            assert harness.context.deps.usage is not None
            [row] = await harness.context.deps.usage.ledger.rows("alice", today, today)
            assert row.runs == 2  # this turn's run, once, and the next turn's (check_turn)
    elif times == 1 and (call.operation in WRITES or call.service == "s3"):
        # A passing fault on a write is absorbed (retried, or re-read when ambiguous): the user gets the answer.
        assert outcome == "run.complete", outcome
    elif times == 1:
        # A read botocore already retried fails the request before it streams: 503 + Retry-After.
        assert outcome == "503 service_unavailable", outcome


@pytest.mark.parametrize(
    ("at", "kind"),
    [(3, "lost_response"), (3, "throttle"), (4, "timeout"), (5, "server_error"), (7, "throttle"), (7, "lost_response")],
)
async def test_the_client_retry_of_a_failed_turn_answers_with_the_message_stored_once(
    harness: Harness, at: int, kind: str
) -> None:
    # Given a turn that failed for good (503 when the call prepared the turn, else run.error at its end)
    chat_id = await harness.new_chat()
    _script(harness)
    harness.inject(FaultPlan(kind=kind, at=at, times=WRITE_ATTEMPTS))
    first = await harness.query(chat_id, QUESTION, "req-retry")
    harness.heal()
    if at <= BEFORE_STREAM:
        assert first.status == 503, first.status
    else:
        assert first.status == 200 and first.terminal is not None and first.terminal["type"] == "run.error"
    # When the client sends the same request again (the model answers the same, if it is asked again)
    _script(harness)
    again = await harness.query(chat_id, QUESTION, "req-retry")
    # Then it gets the answer (stored, or run again), and the question is stored exactly once
    assert again.status == 200 and again.terminal is not None and again.terminal["type"] == "run.complete"
    messages = await harness.store.messages_between(chat_id, None, None)
    assert [m.content for m in messages if m.role == Role.USER] == [QUESTION]
    assert [m.content for m in messages if m.role == Role.ASSISTANT and not m.tool_calls] == [ANSWER]
