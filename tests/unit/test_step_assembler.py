"""StepAssembler as a table: model deltas in, the events they become (and what the step tells after) out."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.domain.models import ToolCall, Usage
from agent_core.llm.base import LlmDelta, ToolCallFragment
from agent_core.runtime.step import StepAssembler

TOOL_TYPES = {"lookup": "backend", "search_docs": "mcp", "pick_color": "frontend", "open_page": "action"}


def frag(index: int, arguments: str = "", *, id: str | None = None, name: str | None = None) -> ToolCallFragment:
    return ToolCallFragment(index=index, id=id, name=name, arguments=arguments)


def run_step(deltas: list[LlmDelta], *, step: int = 1, lead: str = "") -> tuple[StepAssembler, list[dict[str, Any]]]:
    """Feed every delta, then finish and end the calls: every event the step yields, as wire dicts."""
    assembler = StepAssembler(step=step, tool_type=TOOL_TYPES, lead=lead)
    events = [e for d in deltas for e in assembler.feed(d)]
    events += assembler.finish()
    events += [end for _, end in assembler.end_calls()]
    return assembler, [e.model_dump(by_alias=True, exclude_none=True) for e in events]


CASES: list[tuple[str, list[LlmDelta], str, list[dict[str, Any]]]] = [
    ("no output", [LlmDelta(finish_reason="stop")], "", []),
    (
        "text in two deltas",
        [LlmDelta(content="Hel"), LlmDelta(content="lo")],
        "",
        [
            {"type": "content.start", "contentId": "m_1"},
            {"type": "content.delta", "contentId": "m_1", "delta": "Hel"},
            {"type": "content.delta", "contentId": "m_1", "delta": "lo"},
            {"type": "content.end", "contentId": "m_1"},
        ],
    ),
    (
        "reasoning closes when content starts",
        [LlmDelta(reasoning="think"), LlmDelta(reasoning=" more"), LlmDelta(content="ok")],
        "",
        [
            {"type": "reasoning.start", "reasoningId": "r_1"},
            {"type": "reasoning.delta", "reasoningId": "r_1", "delta": "think"},
            {"type": "reasoning.delta", "reasoningId": "r_1", "delta": " more"},
            {"type": "reasoning.end", "reasoningId": "r_1"},
            {"type": "content.start", "contentId": "m_1"},
            {"type": "content.delta", "contentId": "m_1", "delta": "ok"},
            {"type": "content.end", "contentId": "m_1"},
        ],
    ),
    (
        "reasoning alone is closed by finish",
        [LlmDelta(reasoning="hmm")],
        "",
        [
            {"type": "reasoning.start", "reasoningId": "r_1"},
            {"type": "reasoning.delta", "reasoningId": "r_1", "delta": "hmm"},
            {"type": "reasoning.end", "reasoningId": "r_1"},
        ],
    ),
    (
        "lead streamed before text that does not start with a space",
        [LlmDelta(content="Next")],
        "\n\n",
        [
            {"type": "content.start", "contentId": "m_1"},
            {"type": "content.delta", "contentId": "m_1", "delta": "\n\n"},
            {"type": "content.delta", "contentId": "m_1", "delta": "Next"},
            {"type": "content.end", "contentId": "m_1"},
        ],
    ),
    (
        "lead dropped before text that starts with a space",
        [LlmDelta(content=" next")],
        "\n\n",
        [
            {"type": "content.start", "contentId": "m_1"},
            {"type": "content.delta", "contentId": "m_1", "delta": " next"},
            {"type": "content.end", "contentId": "m_1"},
        ],
    ),
    (
        "backend tool call: start, args with chunk indexes, end",
        [
            LlmDelta(tool_calls=[frag(0, id="call_a", name="lookup")]),
            LlmDelta(tool_calls=[frag(0, '{"q":')]),
            LlmDelta(tool_calls=[frag(0, '"x"}')]),
        ],
        "",
        [
            {"type": "tool.start", "toolId": "call_a", "toolName": "lookup", "toolType": "backend"},
            {"type": "tool.args", "toolId": "call_a", "delta": '{"q":', "chunkIndex": 0},
            {"type": "tool.args", "toolId": "call_a", "delta": '"x"}', "chunkIndex": 1},
            {"type": "tool.end", "toolId": "call_a"},
        ],
    ),
    (
        "mcp and frontend calls carry their tool type; unknown names are backend",
        [
            LlmDelta(
                tool_calls=[
                    frag(0, id="c0", name="search_docs"),
                    frag(1, id="c1", name="pick_color"),
                    frag(2, id="c2", name="nobody_knows"),
                ]
            )
        ],
        "",
        [
            {"type": "tool.start", "toolId": "c0", "toolName": "search_docs", "toolType": "mcp"},
            {"type": "tool.start", "toolId": "c1", "toolName": "pick_color", "toolType": "frontend"},
            {"type": "tool.start", "toolId": "c2", "toolName": "nobody_knows", "toolType": "backend"},
            {"type": "tool.end", "toolId": "c0"},
            {"type": "tool.end", "toolId": "c1"},
            {"type": "tool.end", "toolId": "c2"},
        ],
    ),
    (
        "an action call becomes action events",
        [LlmDelta(tool_calls=[frag(0, '{"url":"/a"}', id="act", name="open_page")])],
        "",
        [
            {"type": "action.start", "actionId": "act", "actionName": "open_page"},
            {"type": "action.args", "actionId": "act", "delta": '{"url":"/a"}', "chunkIndex": 0},
            {"type": "action.end", "actionId": "act"},
        ],
    ),
    (
        "a call without an id is named for its step and index",
        [LlmDelta(tool_calls=[frag(3, "{}", name="lookup")])],
        "",
        [
            {"type": "tool.start", "toolId": "call_1_3", "toolName": "lookup", "toolType": "backend"},
            {"type": "tool.args", "toolId": "call_1_3", "delta": "{}", "chunkIndex": 0},
            {"type": "tool.end", "toolId": "call_1_3"},
        ],
    ),
    (
        "interleaved fragments of two calls end in index order",
        [
            LlmDelta(tool_calls=[frag(1, id="b", name="lookup")]),
            LlmDelta(tool_calls=[frag(0, id="a", name="lookup")]),
            LlmDelta(tool_calls=[frag(1, "1"), frag(0, "0")]),
        ],
        "",
        [
            {"type": "tool.start", "toolId": "b", "toolName": "lookup", "toolType": "backend"},
            {"type": "tool.start", "toolId": "a", "toolName": "lookup", "toolType": "backend"},
            {"type": "tool.args", "toolId": "b", "delta": "1", "chunkIndex": 0},
            {"type": "tool.args", "toolId": "a", "delta": "0", "chunkIndex": 0},
            {"type": "tool.end", "toolId": "a"},
            {"type": "tool.end", "toolId": "b"},
        ],
    ),
    (
        "text then a tool call in one delta",
        [LlmDelta(content="Let me look.", tool_calls=[frag(0, id="c", name="lookup")])],
        "",
        [
            {"type": "content.start", "contentId": "m_1"},
            {"type": "content.delta", "contentId": "m_1", "delta": "Let me look."},
            {"type": "tool.start", "toolId": "c", "toolName": "lookup", "toolType": "backend"},
            {"type": "content.end", "contentId": "m_1"},
            {"type": "tool.end", "toolId": "c"},
        ],
    ),
]


@pytest.mark.parametrize(("deltas", "lead", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_deltas_become_events(deltas: list[LlmDelta], lead: str, expected: list[dict[str, Any]]) -> None:
    _, events = run_step(deltas, lead=lead)
    assert events == expected


def test_ids_carry_the_step_number() -> None:
    _, events = run_step([LlmDelta(reasoning="r"), LlmDelta(content="c")], step=7)
    assert {e.get("reasoningId") or e.get("contentId") for e in events} == {"r_7", "m_7"}


def test_the_step_tells_its_text_calls_finish_reason_and_usage() -> None:
    usage = Usage(prompt_tokens=10, completion_tokens=3)
    assembler, _ = run_step(
        [
            LlmDelta(content="A"),
            LlmDelta(content="B", tool_calls=[frag(0, '{"q"', id="c", name="lookup")]),
            LlmDelta(tool_calls=[frag(0, ':"z"}')], finish_reason="tool_calls"),
            LlmDelta(usage=usage),
        ],
        lead="> ",
    )
    assert assembler.text() == "> AB"
    assert assembler.tool_calls() == [ToolCall(id="c", name="lookup", arguments='{"q":"z"}')]
    assert assembler.finish_reason == "tool_calls"
    assert assembler.usage == usage


def test_a_name_arriving_after_the_first_fragment_is_kept() -> None:
    assembler = StepAssembler(step=1, tool_type=TOOL_TYPES)
    assembler.feed(LlmDelta(tool_calls=[frag(0, id="c")]))
    assembler.feed(LlmDelta(tool_calls=[frag(0, "{}", name="lookup")]))
    assert assembler.tool_calls() == [ToolCall(id="c", name="lookup", arguments="{}")]


def test_calls_are_ended_once() -> None:
    assembler = StepAssembler(step=1, tool_type=TOOL_TYPES)
    assembler.feed(LlmDelta(tool_calls=[frag(0, "{}", id="c", name="lookup")]))
    first = assembler.end_calls()
    assert [(call.id, end.type) for call, end in first] == [("c", "tool.end")]
    assert assembler.end_calls() == []
