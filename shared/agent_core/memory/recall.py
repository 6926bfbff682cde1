"""What a turn remembers: the user's most relevant memory records for the message, within a token budget and
above a relevance floor, as one system block ("What you remember"), each record cited by its date. Nothing
relevant, no block: a greeting costs no extra prompt tokens."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from agent_core.llm.tokens import estimate_text
from agent_core.memory.calendar import local_date
from agent_core.memory.long_term import LongTermMemory
from agent_core.memory.retrieval import Hit, SearchQuery
from agent_core.observability import logger

HEADER = "What you remember (from earlier conversations; each record with the date it is from):"
MAX_RECORDS = 8


def cite(hit: Hit, tz: ZoneInfo) -> str:
    return f"- [{local_date(hit.record.at, tz).isoformat()}] {hit.record.text}"


async def recall_block(
    memory: LongTermMemory | None,
    user_id: str,
    message: str,
    tz: ZoneInfo,
    budget: int,
    min_similarity: float,
    version: str | None = None,
) -> str:
    """The block for the prompt, its estimate within `budget` tokens; '' when nothing passes the floor.
    `version`: the user's records' version token when the caller has read it (the turn's context)."""
    if memory is None or budget <= 0 or not message.strip():
        return ""
    used = estimate_text(HEADER)
    query = SearchQuery(message, limit=MAX_RECORDS, max_tokens=budget - used, min_similarity=min_similarity)
    try:
        hits, _ = await memory.search(user_id, query, version)
    except Exception as exc:  # a failing search costs the turn nothing: it goes on without the block
        logger.warning("memory recall skipped", extra={"error": type(exc).__name__})
        return ""
    lines = [HEADER]
    for hit in hits:
        line = cite(hit, tz)
        cost = estimate_text("\n" + line)
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines) if len(lines) > 1 else ""
