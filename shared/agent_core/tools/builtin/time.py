"""The `time` tool: the current time in an IANA zone (default the user's)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from agent_core.domain.zones import known_zone, load_zone
from agent_core.tools.base import Tool, ToolContext, ToolFailure
from agent_core.tools.quick_rules import sentence_of

_CITY_ZONES = {
    "上海": "Asia/Shanghai", "北京": "Asia/Shanghai", "shanghai": "Asia/Shanghai", "beijing": "Asia/Shanghai",
    "东京": "Asia/Tokyo", "tokyo": "Asia/Tokyo", "伦敦": "Europe/London", "london": "Europe/London",
    "纽约": "America/New_York", "new york": "America/New_York", "巴黎": "Europe/Paris", "paris": "Europe/Paris",
    "洛杉矶": "America/Los_Angeles", "los angeles": "America/Los_Angeles", "悉尼": "Australia/Sydney",
    "sydney": "Australia/Sydney", "柏林": "Europe/Berlin", "berlin": "Europe/Berlin", "utc": "UTC",
}  # fmt: skip
_ZONE = re.compile(r"\b[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")
_PLACE = re.compile(
    "|".join(rf"\b{re.escape(c)}\b" if c.isascii() else re.escape(c) for c in sorted(_CITY_ZONES, key=len)[::-1]),
    re.IGNORECASE,
)
# "the time" is the clock only when a place, "now" or the end follows ("the time zone" is something else)
_NOW_OR_PLACE = r"(?=\s*(?:$|[?.!,;:]|(?:in|at|for|there|here|now|right|today|please)\b))"
# Plainly asking for the time or date now (a place may follow); not "how do I get the current time".
_ASKS_TIME = (
    r"\bwhat\s+time\s+(?:is\s+it|it\s+is)\b",
    rf"\bwhat(?:'s|’s|\s+is)\s+the\s+(?:current\s+|local\s+)?(?:time|date){_NOW_OR_PLACE}",
    rf"\b(?:tell|give|show)\s+me\s+the\s+(?:current\s+|local\s+)?(?:time|date){_NOW_OR_PLACE}",
    r"\b(?:current|local)\s+(?:time|date)\s+(?:in|at|for)\b",
    r"\bwhat\s+(?:day|date)\s+is\s+(?:it|today)\b|\btoday(?:'s|’s)\s+date\b",
    r"现在是?几点|几点了|(?:今天|今日)是?(?:几号|几月几[号日]|(?:星期|周|礼拜)几)|(?:现在|当前)是?什么时间"
    r"|(?:现在|当前)的?时间(?:是)?(?:多少)?(?=\s*(?:[？?。.!！,，]|$))",
)


class TimeArgs(BaseModel):
    timezone: str | None = Field(None, description="IANA time zone, e.g. Asia/Shanghai; default: the user's")


class TimeTool(Tool):
    name = "time"
    description = "Current date and time in an IANA time zone (default: the user's time zone)."
    args_model = TimeArgs
    quick_match = re.compile("|".join(f"(?:{p})" for p in _ASKS_TIME), re.IGNORECASE)

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        return self.quick_arg_sets(message, match, ctx_timezone)[0]

    def quick_arg_sets(self, message: str, match: re.Match[str], ctx_timezone: str) -> list[dict[str, Any]]:
        """One call per place named in the request's sentence (zones, known cities, in order); else the user's."""
        sentence = sentence_of(message, match.start(), match.end())
        found = [(m.start(), m.group(0)) for m in _ZONE.finditer(sentence) if known_zone(m.group(0))]
        found += [(m.start(), _CITY_ZONES[m.group(0).lower()]) for m in _PLACE.finditer(sentence)]
        zones = list(dict.fromkeys(tz for _, tz in sorted(found)))
        return [{"timezone": tz} for tz in zones] or [{}]

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, TimeArgs)
        name = args.timezone or ctx.timezone
        zone = load_zone(name)
        if zone is None:
            raise ToolFailure("error", "invalid_arguments", f"unknown time zone {name!r}")
        local = ctx.now.astimezone(zone)
        return {"timezone": name, "time": local.isoformat(timespec="seconds"), "weekday": local.strftime("%A")}
