"""The `time` tool: the current time in an IANA zone (default the user's)."""

from __future__ import annotations

import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from agent_core.tools.base import Tool, ToolContext, ToolFailure

_CITY_ZONES = {
    "上海": "Asia/Shanghai", "北京": "Asia/Shanghai", "shanghai": "Asia/Shanghai", "beijing": "Asia/Shanghai",
    "东京": "Asia/Tokyo", "tokyo": "Asia/Tokyo", "伦敦": "Europe/London", "london": "Europe/London",
    "纽约": "America/New_York", "new york": "America/New_York", "巴黎": "Europe/Paris", "paris": "Europe/Paris",
    "洛杉矶": "America/Los_Angeles", "los angeles": "America/Los_Angeles", "悉尼": "Australia/Sydney",
    "sydney": "Australia/Sydney", "柏林": "Europe/Berlin", "berlin": "Europe/Berlin", "utc": "UTC",
}  # fmt: skip
_ZONE = re.compile(r"\b[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")


class TimeArgs(BaseModel):
    timezone: str | None = Field(None, description="IANA time zone, e.g. Asia/Shanghai; default: the user's")


class TimeTool(Tool):
    name = "time"
    description = "Current date and time in an IANA time zone (default: the user's time zone)."
    args_model = TimeArgs
    quick_match = re.compile(r"现在几点|几点了|what time is it|current time", re.IGNORECASE)

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        zone = _ZONE.search(message)
        if zone:
            return {"timezone": zone.group(0)}
        lowered = message.lower()
        for city, tz in _CITY_ZONES.items():
            if city in lowered:
                return {"timezone": tz}
        return {}

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, TimeArgs)
        name = args.timezone or ctx.timezone
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ToolFailure("error", "invalid_arguments", f"unknown time zone {name!r}") from exc
        local = ctx.now.astimezone(zone)
        return {"timezone": name, "time": local.isoformat(timespec="seconds"), "weekday": local.strftime("%A")}
