"""Budgets and the rate limit, checked before the model is called.

A turn reserves `AGENT_USAGE_RESERVE_TOKENS` (and their estimated cost) with one conditional update ADD on the
user's day item: the condition admits it only while the day's spend, reservations included, is below the
budget, and while this minute's request count is below the limit. The update is one more item of the
transaction that begins the turn (TurnStore.begin_turn: the lease, the message, the run) when the turn writes
nothing before it, else its own UpdateItem. The ledger settles the reservation to the actual spend when the
run ends. So however many turns of one user run at once, the spend can pass the budget by at most one
reservation: every admitted turn saw the total below the budget, and each adds at most its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from aws_lambda_powertools.metrics import MetricUnit

from agent_core.config import Settings
from agent_core.domain.models import Usage
from agent_core.errors import BudgetExceeded, RateLimited, TooManyRequests
from agent_core.observability import logger, metrics
from agent_core.store.items import budget_key, limits_key
from agent_core.store.schema import TTL_ATTRIBUTE
from agent_core.store.table import Atom, Condition, ConditionFailed, Item, Table, Update, UpdateOp, lt, not_exists
from agent_core.usage.ledger import BUDGET_TTL_DAYS, expires_after
from agent_core.usage.prices import MICROS_PER_USD, PriceTable, usd

TOKENS = "tokens"
COST = "costMicros"


def minute_attribute(now_s: int) -> str:
    return f"rpm{now_s // 60}"


@dataclass(frozen=True)
class Limits:
    """0: no limit."""

    daily_tokens: int = 0
    daily_cost_micros: int = 0
    requests_per_minute: int = 0

    @property
    def any(self) -> bool:
        return bool(self.daily_tokens or self.daily_cost_micros or self.requests_per_minute)

    @staticmethod
    def of(settings: Settings, item: Item | None = None) -> Limits:
        """The settings' limits, each overridden by the user's LIMITS item where it has the attribute."""
        item = item or {}
        return Limits(
            daily_tokens=int(item.get("dailyTokens", settings.usage_daily_token_budget)),
            daily_cost_micros=int(
                item.get("dailyCostMicros", round(settings.usage_daily_cost_budget_usd * MICROS_PER_USD))
            ),
            requests_per_minute=int(item.get("requestsPerMinute", settings.usage_requests_per_minute)),
        )


class LimitsCache:
    """Each user's limits, read from their LIMITS item at most once per `ttl_s` in a process."""

    def __init__(self, table: Table, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self.table = table
        self.settings = settings
        self.clock = clock
        self._cache: dict[str, tuple[float, Limits]] = {}

    async def get(self, user_id: str) -> Limits:
        now = self.clock()
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        limits = Limits.of(self.settings, await self.table.get(limits_key(user_id)))
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[user_id] = (now + self.settings.usage_limits_cache_s, limits)
        return limits

    async def put(self, user_id: str, overrides: dict[str, int]) -> None:
        """Set a user's own limits (ops: `agent-core limits`); other processes see them within the cache time."""
        await self.table.put({**limits_key(user_id), **overrides})
        self._cache.pop(user_id, None)


@dataclass(frozen=True)
class Reservation:
    """What a turn reserved on its local day: settled by the ledger when the run ends."""

    user_id: str
    day: str
    tokens: int = 0
    cost_micros: int = 0


@dataclass(frozen=True)
class Reserving:
    """A turn's reservation before it is written: `write` reserves it (None: the user has no limit)."""

    reservation: Reservation
    write: UpdateOp | None
    limits: Limits
    now_s: int
    tz: ZoneInfo


class Budget:
    def __init__(self, table: Table, settings: Settings, prices: PriceTable, limits: LimitsCache) -> None:
        self.table = table
        self.settings = settings
        self.prices = prices
        self.limits = limits

    async def plan(self, user_id: str, model: str, now_s: int, tz: ZoneInfo) -> Reserving:
        """What a turn of `user_id` would reserve now, and the conditional write that reserves it (None when the
        user has no limit): reads only the cached limits."""
        day = datetime.fromtimestamp(now_s, tz).date().isoformat()
        limits = await self.limits.get(user_id)
        if not limits.any:
            return Reserving(Reservation(user_id, day), None, limits, now_s, tz)  # nothing to check or write
        tokens = self.settings.usage_reserve_tokens
        price = self.prices.price(model)
        # The reservation's cost at the dearer of the input and output prices: never below what it may spend.
        dearer = Usage(completion_tokens=tokens) if price.output >= price.input else Usage(prompt_tokens=tokens)
        cost = self.prices.cost_micros(model, dearer)
        add: dict[str, int] = {}
        clauses: list[tuple[Atom, ...]] = []
        if limits.daily_tokens:
            add[TOKENS] = tokens
            clauses.append((not_exists(TOKENS), lt(TOKENS, limits.daily_tokens)))
        if limits.daily_cost_micros:
            add[COST] = cost
            clauses.append((not_exists(COST), lt(COST, limits.daily_cost_micros)))
        if limits.requests_per_minute:
            minute = minute_attribute(now_s)
            add[minute] = 1
            clauses.append((not_exists(minute), lt(minute, limits.requests_per_minute)))
        update = Update(set={TTL_ATTRIBUTE: expires_after(day, BUDGET_TTL_DAYS)}, add=add)
        write = UpdateOp(budget_key(user_id, day), update, Condition(tuple(clauses)))
        reservation = Reservation(user_id, day, tokens if TOKENS in add else 0, cost if COST in add else 0)
        return Reserving(reservation, write, limits, now_s, tz)

    async def admit(self, user_id: str, model: str, now_s: int, tz: ZoneInfo) -> Reservation:
        """Reserve a turn's tokens and count its request with a write of its own, or raise BudgetExceeded /
        RateLimited (429)."""
        return await self.reserve(await self.plan(user_id, model, now_s, tz))

    async def reserve(self, reserving: Reserving) -> Reservation:
        """Write a planned reservation on its own (429 when refused)."""
        write = reserving.write
        if write is None:
            return reserving.reservation  # nothing to check: no write before the model call
        try:
            await self.table.update(write.key, write.update, write.condition)
        except ConditionFailed:
            raise await self.refusal(reserving) from None
        return reserving.reservation

    async def refusal(self, reserving: Reserving) -> TooManyRequests:
        """The 429 of a reservation whose condition failed (counted and logged): read only for a refused turn."""
        reservation = reserving.reservation
        refusal = await self._refusal(reserving)
        denials = "RateLimitDenials" if isinstance(refusal, RateLimited) else "BudgetDenials"
        metrics.add_metric(name=denials, unit=MetricUnit.Count, value=1)
        logger.info("turn refused", extra={"userId": reservation.user_id, "code": refusal.code, "day": reservation.day})
        return refusal

    async def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose turn never called the model (a replayed requestId, a failed start)."""
        if not (reservation.tokens or reservation.cost_micros):
            return
        add = {TOKENS: -reservation.tokens, COST: -reservation.cost_micros}
        await self.table.update(budget_key(reservation.user_id, reservation.day), Update(add=add))

    async def spent(self, user_id: str, day: str) -> Item:
        return await self.table.get(budget_key(user_id, day)) or {}

    async def _refusal(self, reserving: Reserving) -> TooManyRequests:
        """Why the condition failed (read only when a turn is refused), with Retry-After and what remains."""
        user_id, day = reserving.reservation.user_id, reserving.reservation.day
        limits, now_s, tz = reserving.limits, reserving.now_s, reserving.tz
        item = await self.spent(user_id, day)
        used_tokens, used_cost = int(item.get(TOKENS, 0)), int(item.get(COST, 0))
        requests = int(item.get(minute_attribute(now_s), 0))
        remaining: dict[str, Any] = {}
        if limits.daily_tokens:
            remaining["tokens"] = max(0, limits.daily_tokens - used_tokens)
        if limits.daily_cost_micros:
            remaining["costUsd"] = usd(max(0, limits.daily_cost_micros - used_cost))
        if limits.requests_per_minute:
            remaining["requests"] = max(0, limits.requests_per_minute - requests)
        budget_hit = (limits.daily_tokens and used_tokens >= limits.daily_tokens) or (
            limits.daily_cost_micros and used_cost >= limits.daily_cost_micros
        )
        if limits.requests_per_minute and requests >= limits.requests_per_minute and not budget_hit:
            retry = 60 - now_s % 60
            data = {"limit": "requests_per_minute", "remaining": remaining, "retryAfterS": retry}
            return RateLimited("too many requests this minute; try again shortly", retry_after_s=retry, data=data)
        retry = _seconds_to_midnight(now_s, tz)
        data = {"limit": "daily_budget", "remaining": remaining, "retryAfterS": retry, "day": day}
        return BudgetExceeded("today's usage budget is spent; it renews at midnight", retry_after_s=retry, data=data)


def _seconds_to_midnight(now_s: int, tz: ZoneInfo) -> int:
    local = datetime.fromtimestamp(now_s, tz)
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time(), tz)
    return max(1, int(midnight.timestamp()) - now_s)
