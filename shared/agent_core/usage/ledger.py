"""The usage ledger: per user, local day and model, counters added with one transaction per run or job.

A record is one TransactWriteItems: a Put of the run's (or job's) marker on condition it does not exist, an
Update ADD of its counters to the ledger row, and an Update ADD settling its budget reservation to the actual
spend. A retried job or a redelivered message finds the marker and changes nothing: exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_core.domain.models import Usage
from agent_core.observability import metrics
from agent_core.store.items import USAGE_PREFIX, budget_key, usage_key, usage_mark_key, user_pk
from agent_core.store.schema import PK, SK, TTL_ATTRIBUTE
from agent_core.store.table import (
    Condition,
    Item,
    Put,
    SkRange,
    Table,
    TransactionFailed,
    Update,
    UpdateOp,
    not_exists,
)
from agent_core.usage.prices import PriceTable, usd

MARKER_TTL_DAYS = 30  # longer than any queue keeps a message (SQS: 14 days at most)
BUDGET_TTL_DAYS = 3  # a day's budget item outlives the day in every zone
CONDITION_FAILED = "ConditionalCheckFailed"
COUNTERS = ("inputTokens", "outputTokens", "cachedTokens", "runs", "jobs", "toolCalls", "costMicros")


def expires_after(day: str, days: int) -> int:
    """Epoch seconds `days` after the start of `day` (UTC): a TTL."""
    start = date.fromisoformat(day) + timedelta(days=days)
    return int((start - date(1970, 1, 1)).total_seconds())


@dataclass(frozen=True)
class UsageRecord:
    """What one run or job spent, under the user it served, on their local day."""

    user_id: str
    day: str  # yyyy-mm-dd in the user's zone
    model: str
    marker: str  # `run:{runId}` or `job:{kind}:{id}`: recorded at most once
    usage: Usage
    runs: int = 0
    jobs: int = 0
    tool_calls: int = 0
    reserved_tokens: int = 0  # what the run reserved against its budget (settled here)
    reserved_cost_micros: int = 0


@dataclass(frozen=True)
class UsageRow:
    day: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    runs: int
    jobs: int
    tool_calls: int
    cost_micros: int

    def wire(self) -> dict[str, Any]:
        return {
            "day": self.day,
            "model": self.model,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cachedTokens": self.cached_tokens,
            "runs": self.runs,
            "jobs": self.jobs,
            "toolCalls": self.tool_calls,
            "costUsd": usd(self.cost_micros),
        }


def tokens_of(usage: Usage) -> int:
    """The tokens a budget counts: prompt plus completion."""
    return usage.prompt_tokens + usage.completion_tokens


class Ledger:
    def __init__(self, table: Table, prices: PriceTable) -> None:
        self.table = table
        self.prices = prices

    async def record(self, record: UsageRecord) -> bool:
        """Add `record` to the ledger and settle its reservation; False when it was already recorded."""
        usage = record.usage
        cost = self.prices.cost_micros(record.model, usage)
        counters = {
            "inputTokens": usage.prompt_tokens,
            "outputTokens": usage.completion_tokens,
            "cachedTokens": usage.cache_read_tokens,
            "runs": record.runs,
            "jobs": record.jobs,
            "toolCalls": record.tool_calls,
            "costMicros": cost,
        }
        marker: Item = {**usage_mark_key(record.user_id, record.marker)}
        marker[TTL_ATTRIBUTE] = expires_after(record.day, MARKER_TTL_DAYS)
        settle = {"tokens": tokens_of(usage) - record.reserved_tokens, "costMicros": cost - record.reserved_cost_micros}
        budget_ttl = {TTL_ATTRIBUTE: expires_after(record.day, BUDGET_TTL_DAYS)}
        try:
            await self.table.transact(
                [
                    Put(marker, Condition.of(not_exists(PK))),
                    UpdateOp(
                        usage_key(record.user_id, record.day, record.model),
                        Update(set={"day": record.day, "model": record.model}, add=counters),
                    ),
                    UpdateOp(budget_key(record.user_id, record.day), Update(set=budget_ttl, add=settle)),
                ]
            )
        except TransactionFailed as failed:
            if failed.reasons and failed.reasons[0] == CONDITION_FAILED:
                return False
            raise
        # The spend metric (alarmed on by the stack): counted once, as the ledger is.
        metrics.add_metric(name="EstimatedCostMicroUsd", unit=MetricUnit.Count, value=cost)
        return True

    async def rows(self, user_id: str, first_day: str, last_day: str) -> list[UsageRow]:
        """The ledger rows of `user_id` from `first_day` to `last_day` (inclusive), by day then model."""
        sk = SkRange(low=f"{USAGE_PREFIX}{first_day}#", high=f"{USAGE_PREFIX}{last_day}#~")
        rows: list[UsageRow] = []
        start: Item | None = None
        while True:
            page = await self.table.query(user_pk(user_id), sk, start_key=start)
            rows += [_row(item) for item in page.items]
            if page.last_key is None:
                return rows
            start = page.last_key


def _row(item: Item) -> UsageRow:
    day, _, model = str(item[SK])[len(USAGE_PREFIX) :].partition("#")
    counts = {name: int(item.get(name, 0)) for name in COUNTERS}
    return UsageRow(
        day=day,
        model=model,
        input_tokens=counts["inputTokens"],
        output_tokens=counts["outputTokens"],
        cached_tokens=counts["cachedTokens"],
        runs=counts["runs"],
        jobs=counts["jobs"],
        tool_calls=counts["toolCalls"],
        cost_micros=counts["costMicros"],
    )
