"""The user profile: durable facts with their source dates, merged (newer replaces older), shown bounded."""

from __future__ import annotations

from typing import Any

from agent_core.domain.models import Profile, ProfileFact

ASPECTS = ("interests", "budget", "concerns", "constraints", "preferences")
BLOCK_CHARS = 800
MAX_FACTS = 60


def merge_facts(profile: Profile, found: list[dict[str, Any]], source_date: str) -> Profile:
    """New facts join the profile; a fact with the same aspect and key replaces the older one."""
    by_key = {(f.aspect, f.key.lower()): f for f in profile.facts}
    for raw in found:
        aspect = str(raw.get("aspect", "")).strip().lower()
        key = str(raw.get("key", "")).strip()
        value = str(raw.get("value", "")).strip()
        if not (aspect and key and value):
            continue
        by_key[(aspect, key.lower())] = ProfileFact(aspect=aspect, key=key, value=value, source_date=source_date)
    facts = sorted(by_key.values(), key=lambda f: f.source_date, reverse=True)[:MAX_FACTS]
    return profile.model_copy(update={"facts": facts})


def facts_for(profile: Profile | None, aspect: str | None = None) -> list[ProfileFact]:
    if profile is None:
        return []
    return [f for f in profile.facts if aspect is None or f.aspect == aspect.lower()]


def profile_block(profile: Profile | None) -> str:
    """The bounded block that joins the system prompt; empty when nothing is known."""
    facts = facts_for(profile)
    if not facts:
        return ""
    lines = ["What you know about the user (from earlier conversations; dates are when it was said):"]
    used = len(lines[0])
    for fact in facts:
        line = f"- {fact.aspect}: {fact.key}: {fact.value} ({fact.source_date})"
        if used + len(line) > BLOCK_CHARS:
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)
