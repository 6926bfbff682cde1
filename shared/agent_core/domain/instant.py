"""An instant given as text (the `X-Agent-Now` header, `agent-core jobs --now`): ISO 8601 with a UTC offset.

One rule for both: a time without an offset is refused, never taken as UTC or local time silently."""

from __future__ import annotations

from datetime import datetime

INSTANT_FORM = "ISO 8601 with a UTC offset, e.g. 2026-01-07T11:00:00+08:00 or 2026-01-07T03:00:00Z"


class NotAnInstant(ValueError):
    """The text is not an ISO 8601 time, or has no UTC offset; the message names the expected form."""


def parse_instant(value: str) -> datetime:
    """`value` as an aware datetime; raises NotAnInstant."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise NotAnInstant(f"not an ISO 8601 time: {value!r}; expected {INSTANT_FORM}") from None
    if parsed.tzinfo is None:
        raise NotAnInstant(f"{value!r} has no UTC offset; expected {INSTANT_FORM}")
    return parsed
