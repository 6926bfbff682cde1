"""A user's usage over a range of local days, with their limits and what remains today: the answer of
GET /api/ap/usage and `agent-core usage`."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from agent_core.errors import InvalidRequest
from agent_core.usage.budget import COST, TOKENS
from agent_core.usage.meter import UsageMeter
from agent_core.usage.prices import usd

MAX_DAYS = 366
DEFAULT_DAYS = 7


def day_range(first: str | None, last: str | None, today: date) -> tuple[str, str]:
    """`from`/`to` (yyyy-mm-dd, inclusive): the last DEFAULT_DAYS days to today by default; 422 when malformed,
    reversed or longer than MAX_DAYS."""
    end = _day(last, "to") if last else today
    start = _day(first, "from") if first else end - timedelta(days=DEFAULT_DAYS - 1)
    if start > end:
        raise InvalidRequest("`from` is after `to`", param="from", code="invalid_date_range")
    if (end - start).days >= MAX_DAYS:
        raise InvalidRequest(f"at most {MAX_DAYS} days at once", param="from", code="invalid_date_range")
    return start.isoformat(), end.isoformat()


def _day(text: str, param: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(f"`{param}` is not a date (yyyy-mm-dd)", param=param, code="invalid_date") from None


async def usage_report(
    meter: UsageMeter, user_id: str, first: str | None, last: str | None, tz: ZoneInfo, now: datetime
) -> dict[str, Any]:
    today = now.astimezone(tz).date()
    start, end = day_range(first, last, today)
    rows = await meter.ledger.rows(user_id, start, end)
    items = [row.wire() for row in rows]
    totals = {
        key: sum(item[key] for item in items)
        for key in ("inputTokens", "outputTokens", "cachedTokens", "runs", "jobs", "toolCalls")
    }
    totals["costUsd"] = usd(sum(row.cost_micros for row in rows))
    limits = await meter.limits.get(user_id)
    spent = await meter.budget.spent(user_id, today.isoformat())
    today_tokens, today_cost = int(spent.get(TOKENS, 0)), int(spent.get(COST, 0))
    budget: dict[str, Any] = {
        "day": today.isoformat(),
        "dailyTokens": limits.daily_tokens or None,
        "dailyCostUsd": usd(limits.daily_cost_micros) if limits.daily_cost_micros else None,
        "requestsPerMinute": limits.requests_per_minute or None,
        "spentTokens": today_tokens,  # reservations of turns in flight included
        "spentCostUsd": usd(today_cost),
        "remainingTokens": max(0, limits.daily_tokens - today_tokens) if limits.daily_tokens else None,
        "remainingCostUsd": usd(max(0, limits.daily_cost_micros - today_cost)) if limits.daily_cost_micros else None,
    }
    return {
        "userId": user_id,
        "from": start,
        "to": end,
        "timezone": tz.key,
        "items": items,
        "totals": totals,
        "budget": budget,
    }
