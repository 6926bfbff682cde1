"""IANA time zones by name: the one lookup settings, the calendar and the time tool use."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def load_zone(name: str) -> ZoneInfo | None:
    """The IANA zone named `name` (Europe/Paris, UTC); None when the server knows no such zone.

    Unknown names raise ZoneInfoNotFoundError, malformed ones ValueError, and a folder of the zone
    database ("America") IsADirectoryError, an OSError.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def known_zone(name: str) -> bool:
    """Whether `name` is an IANA zone the server knows (Europe/Paris, UTC)."""
    return load_zone(name) is not None
