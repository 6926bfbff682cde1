"""A user with a budget: the turn's reservation is one more item of the transaction that begins it (no call of
its own), and storage faults on that transaction leave the day's spend exactly what the ledger holds: a
reservation written once however often its begin is retried, given back when the turn did not go on to the
model, never given back unwritten."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.faults.harness import Harness, build_harness, check_turn
from tests.faults.test_storage_faults import ANSWER, QUESTION, TURN_CALLS, WRITE_ATTEMPTS, _script
from tests.support.faults import Call, FaultPlan
from tests.support.openai_stub import OpenAiStub

BEGIN = TURN_CALLS.index(Call("dynamodb", "TransactWriteItems")) + 1  # the begin: marker, lease, message, run


@pytest.fixture
async def harness(aws_env: None, openai_stub: OpenAiStub) -> AsyncIterator[Harness]:
    h = build_harness(openai_stub, AGENT_USAGE_DAILY_TOKEN_BUDGET="1000000000", AGENT_USAGE_RESERVE_TOKENS="4096")
    async with h.client:
        yield h


async def _spend_is_the_ledgers(h: Harness) -> None:
    """The day's spend (reservations of turns in flight included; none is) equals the ledger's tokens."""
    assert h.context.deps.usage is not None
    today = datetime.now(UTC).date().isoformat()
    spent = await h.context.deps.usage.budget.spent("alice", today)
    rows = await h.context.deps.usage.ledger.rows("alice", today, today)
    assert rows and int(spent.get("tokens", 0)) == sum(r.input_tokens + r.output_tokens for r in rows)


async def test_a_turn_with_a_budget_makes_the_calls_of_a_turn_without(harness: Harness) -> None:
    # Given a user with a budget (their LIMITS item is read once, cached)
    chat_id = await harness.new_chat()
    _script(harness)
    plan = harness.inject(FaultPlan())
    # When a turn runs
    seen = await harness.query(chat_id, QUESTION, "req-clean")
    # Then it makes exactly the calls of a turn without one: the reservation rides in the begin's transaction
    assert plan.calls == TURN_CALLS, [str(c) for c in plan.calls]
    assert await check_turn(harness, chat_id, QUESTION, ANSWER, seen) == "run.complete"
    await _spend_is_the_ledgers(harness)


@pytest.mark.parametrize("times", [1, WRITE_ATTEMPTS], ids=["once", "lasting"])
@pytest.mark.parametrize("kind", ["lost_response", "throttle", "timeout", "conflict", "server_error"])
async def test_a_fault_on_the_begin_leaves_the_days_spend_the_ledgers(harness: Harness, kind: str, times: int) -> None:
    # Given a fault on the begin's transaction, once (retried) or for every attempt (the turn fails: 503)
    chat_id = await harness.new_chat()
    _script(harness)
    plan = harness.inject(FaultPlan(kind=kind, at=BEGIN, times=times))
    seen = await harness.query(chat_id, QUESTION, f"req-{kind}")
    assert plan.injected, "the fault was not injected"
    outcome = await check_turn(harness, chat_id, QUESTION, ANSWER, seen)
    assert outcome == ("run.complete" if times == 1 else "503 service_unavailable"), outcome
    # Then (the next turn run and settled too) the day's spend is the ledger's: a begin that committed before its
    # answer was lost counted its reservation once, and gave it back when the turn failed; one that never
    # committed gave nothing back
    await _spend_is_the_ledgers(harness)


@pytest.mark.parametrize("kind", ["lost_response", "throttle"])
async def test_the_retry_of_a_turn_that_failed_to_begin_reserves_once(harness: Harness, kind: str) -> None:
    # Given a turn whose begin failed for good (its first attempt committed when the answer was lost: the run is
    # then stored failed, so the retry restarts it; else nothing was stored, so the retry begins it)
    chat_id = await harness.new_chat()
    _script(harness)
    harness.inject(FaultPlan(kind=kind, at=BEGIN, times=WRITE_ATTEMPTS))
    first = await harness.query(chat_id, QUESTION, "req-again")
    harness.heal()
    assert first.status == 503
    # When the client sends the same request again
    _script(harness)
    again = await harness.query(chat_id, QUESTION, "req-again")
    # Then it is answered, and the day's spend is the ledger's: the retry reserved once, settled by its record
    assert again.terminal is not None and again.terminal["type"] == "run.complete", again.events[-1:]
    await _spend_is_the_ledgers(harness)
