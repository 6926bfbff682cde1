"""Built-in memory tools: `get_user_profile(aspect)` and `search_chat_history(time_range | start/end, query?)`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agent_core.memory.calendar import zone
from agent_core.memory.history_records import recall
from agent_core.memory.profile import ASPECTS, facts_for
from agent_core.memory.time_query import parse_range_args
from agent_core.tools.base import Tool, ToolContext, ToolFailure


class ProfileArgs(BaseModel):
    aspect: str | None = Field(None, description=f"One of {', '.join(ASPECTS)}; empty for everything")


class GetUserProfileTool(Tool):
    name = "get_user_profile"
    description = "What is remembered about the user (interests, budget, concerns, constraints, preferences)."
    args_model = ProfileArgs

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, ProfileArgs)
        if ctx.memory is None:
            raise ToolFailure("error", "unavailable", "no profile store")
        profile = await ctx.memory.get_profile(ctx.user_id)
        facts = facts_for(profile, args.aspect)
        return {"facts": [{"aspect": f.aspect, "key": f.key, "value": f.value, "since": f.source_date} for f in facts]}


class HistoryArgs(BaseModel):
    time_range: str | None = Field(None, description='A time phrase such as "yesterday", "上周", "3 days ago"')
    start: str | None = Field(None, description="Start date, YYYY-MM-DD (instead of time_range)")
    end: str | None = Field(None, description="End date, YYYY-MM-DD (default today)")
    query: str | None = Field(None, description="Optional words to look for")


class SearchChatHistoryTool(Tool):
    name = "search_chat_history"
    description = "Look up what was discussed in past conversations over a time range (daily summaries first)."
    args_model = HistoryArgs

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, HistoryArgs)
        if ctx.memory is None:
            raise ToolFailure("error", "unavailable", "no history store")
        try:
            span = parse_range_args(args.time_range, args.start, args.end, ctx.timezone, ctx.now)
        except ValueError as exc:
            raise ToolFailure("error", "invalid_arguments", str(exc)) from exc
        tz = zone(ctx.timezone, ctx.settings.default_timezone)
        found = await recall(ctx.memory, ctx.user_id, span, tz, detail=bool(args.query))
        records = found.text()
        if args.query:
            words = [w.lower() for w in args.query.split() if w]
            lines = [line for line in records.splitlines() if any(w in line.lower() for w in words)]
            records = "\n".join(lines) or records
        return {"start": span.start.isoformat(), "end": span.end.isoformat(), "records": records or "(no records)"}
