"""Time zones have one home (memory/calendar.py): every name the zone database cannot load is refused alike."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.errors import InvalidTimezone
from agent_core.memory.calendar import from_ms, known_zone, load_zone, to_ms, valid_zone, zone
from agent_core.tools.base import ToolContext
from agent_core.tools.builtin.time import TimeTool
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import ToolService
from tests.support.fixtures import make_settings

# Unknown (ZoneInfoNotFoundError), malformed (ValueError), and a folder of the database (IsADirectoryError).
NOT_ZONES = ["Mars/Olympus", "../../etc/passwd", "America", ""]


@pytest.mark.parametrize("name", NOT_ZONES)
def test_a_name_that_is_no_zone_is_refused_everywhere(name: str) -> None:
    assert load_zone(name) is None and not known_zone(name)
    with pytest.raises(InvalidTimezone):
        valid_zone(name)
    assert zone(name, "Europe/Paris").key == "Europe/Paris"


def test_a_zone_loads() -> None:
    assert known_zone("Europe/Paris") and valid_zone("UTC") == "UTC"
    assert zone("Asia/Tokyo", "UTC").key == "Asia/Tokyo"
    assert zone(None, "Not/AZone").key == "UTC"


def test_milliseconds_round_trip() -> None:
    moment = datetime(2026, 1, 7, 10, 0, 0, 123000, tzinfo=UTC)
    assert from_ms(to_ms(moment)) == moment and to_ms(moment) == 1767780000123


async def test_the_time_tool_refuses_a_folder_of_zones_as_a_tool_error() -> None:
    settings = make_settings()
    service = ToolService(ToolRegistry([TimeTool()]), settings, audit=lambda _: None)
    ctx = ToolContext("req", "conv", "user", settings, "UTC", datetime(2026, 1, 7, tzinfo=UTC))
    execution = await service.execute(ToolCall(id="c1", name="time", arguments='{"timezone": "America"}'), ctx)
    assert (execution.status, execution.reason) == (ToolStatus.ERROR, "invalid_arguments")
    ok = await service.execute(ToolCall(id="c2", name="time", arguments='{"timezone": "Asia/Tokyo"}'), ctx)
    assert ok.status == ToolStatus.OK and ok.output["time"].startswith("2026-01-07T09:00:00")
