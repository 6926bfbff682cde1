"""Built-in memory tools: `get_user_profile(aspect)`, `search_chat_history(time_range | start/end, query?)` and
`search_memory(query, start?, end?)` (long-term memory records, hybrid retrieval)."""

from __future__ import annotations

from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from agent_core.memory.calendar import day_bounds, zone
from agent_core.memory.history_records import recall
from agent_core.memory.long_term import LongTermMemory
from agent_core.memory.profile import ASPECTS, facts_for
from agent_core.memory.recall import cite
from agent_core.memory.retrieval import SearchQuery
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
        if args.query and ctx.records is not None:
            # With words to look for: the same retrieval as search_memory, within the range (else the summaries).
            found_records = await _search(ctx.records, ctx, args.query, span.start, span.end, tz)
            if found_records:
                return {"start": span.start.isoformat(), "end": span.end.isoformat(), "records": found_records}
        found = await recall(ctx.memory, ctx.user_id, span, tz, detail=bool(args.query))
        records = found.text()
        if args.query:
            words = [w.lower() for w in args.query.split() if w]
            lines = [line for line in records.splitlines() if any(w in line.lower() for w in words)]
            records = "\n".join(lines) or records
        return {"start": span.start.isoformat(), "end": span.end.isoformat(), "records": records or "(no records)"}


SEARCH_TOKENS = 1500  # what one search_memory result may hold (estimated tokens)


async def _search(
    memory: LongTermMemory, ctx: ToolContext, query: str, start: date | None, end: date | None, tz: ZoneInfo
) -> str:
    start_ms = day_bounds(start, tz)[0] if start else None
    end_ms = day_bounds(end, tz)[1] if end else None
    hits, _ = await memory.search(
        ctx.user_id, SearchQuery(query, limit=20, max_tokens=SEARCH_TOKENS, start=start_ms, end=end_ms)
    )
    return "\n".join(cite(h, tz) for h in hits)


class MemorySearchArgs(BaseModel):
    query: str = Field(..., min_length=1, max_length=2000, description="What to look for, in the user's words")
    start: str | None = Field(None, description="Only records from this date on, YYYY-MM-DD")
    end: str | None = Field(None, description="Only records up to this date (inclusive), YYYY-MM-DD")


class SearchMemoryTool(Tool):
    name = "search_memory"
    description = (
        "Search everything remembered from past conversations (exchanges, session and daily summaries, facts) "
        "for what is relevant to a query; optionally within dates. Each record comes with its date."
    )
    args_model = MemorySearchArgs

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, MemorySearchArgs)
        if ctx.records is None:
            raise ToolFailure("error", "unavailable", "no long-term memory")
        try:
            start = date.fromisoformat(args.start) if args.start else None
            end = date.fromisoformat(args.end) if args.end else None
        except ValueError as exc:
            raise ToolFailure("error", "invalid_arguments", "dates are YYYY-MM-DD") from exc
        tz = zone(ctx.timezone, ctx.settings.default_timezone)
        return {"records": await _search(ctx.records, ctx, args.query, start, end, tz) or "(no records)"}
