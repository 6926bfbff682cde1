"""docs/protocol.md describes every native event type, and its example run obeys the rules it states."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

from agent_core.domain import events
from agent_core.domain.events import TERMINAL_TYPES, Event, FinishReason
from agent_core.domain.models import ToolStatus

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _event_types() -> set[str]:
    found = set()
    for value in vars(events).values():
        if isinstance(value, type) and issubclass(value, Event) and value is not Event:
            found.add(str(value.model_fields["type"].default))
    return found


def test_every_event_type_has_a_row_in_the_protocol_document() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = sorted(t for t in _event_types() if f"| `{t}` |" not in text)
    assert missing == []


def test_the_example_run_follows_the_ordering_rules() -> None:
    text = DOC.read_text(encoding="utf-8")
    run = [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: {")]
    assert [e["seq"] for e in run] == list(range(1, len(run) + 1))
    assert run[0]["type"] == "request.query" and run[-1]["type"] in TERMINAL_TYPES
    assert sum(e["type"] in TERMINAL_TYPES for e in run) == 1
    assert {e["type"] for e in run} <= _event_types()
    ends = {e["toolId"]: e["seq"] for e in run if e["type"] == "tool.end"}
    assert all(ends[e["toolId"]] < e["seq"] for e in run if e["type"] == "tool.result")


def _documented_values(heading: str) -> set[str]:
    """The values in the first column of the table under `### heading` (up to the next heading)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE))


def test_every_finish_reason_is_documented_and_only_those() -> None:
    assert _documented_values("finishReason") == set(get_args(FinishReason))


def test_every_tool_status_is_documented_and_only_those() -> None:
    assert _documented_values("Tool status") == {status.value for status in ToolStatus}
