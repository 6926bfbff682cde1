"""Local dates in a user's zone: day bounds, the UTC hour a local day closes in, id bounds for time ranges."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent_core.domain.ids import base36
from agent_core.domain.zones import known_zone, load_zone
from agent_core.errors import InvalidTimezone
from agent_core.observability import logger

MAX_ZONE_NAME = 64


def valid_zone(name: str, param: str = "timezone") -> str:
    """`name` if it is an IANA zone the server knows (Europe/Paris, UTC); InvalidTimezone (400) otherwise."""
    problem = f"{param} must be an IANA time zone name such as Europe/Paris, not {name[:MAX_ZONE_NAME]!r}"
    if not name or len(name) > MAX_ZONE_NAME or not known_zone(name):
        raise InvalidTimezone(problem, param=param)
    return name


def zone(name: str | None, default: str) -> ZoneInfo:
    """The user's zone; an invalid name falls back to the default (logged)."""
    for candidate in (name, default):
        if not candidate:
            continue
        if (found := load_zone(candidate)) is not None:
            return found
        logger.warning("invalid time zone, using the default", extra={"timezone": candidate})
    return ZoneInfo("UTC")


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime (the unit of every stored time)."""
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """The UTC datetime of epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def local_date(ms: int, tz: ZoneInfo) -> date:
    return from_ms(ms).astimezone(tz).date()


def day_bounds(day: date, tz: ZoneInfo) -> tuple[int, int]:
    """[start, end) of a local day in epoch millis (DST days are 23 or 25 hours long)."""
    start = datetime.combine(day, time.min, tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)
    return to_ms(start), to_ms(end)


def close_bucket(close_ms: int) -> str:
    """The UTC hour in which an instant falls, as yyyymmddhh (the day-marker index bucket)."""
    return from_ms(close_ms).strftime("%Y%m%d%H")


def id_floor(ms: int) -> str:
    """A bound no message id at or after `ms` sorts below."""
    return f"{base36(max(ms, 0), 9)}0000000"


def id_ceiling(ms: int) -> str:
    """A bound every message id at or before `ms` sorts below."""
    return f"{base36(ms, 9)}zzzzzzz"
