"""build_window: pairing of tool calls and results, the token budget, the summary prefix, trimming."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Kind, Message, Role, Summary, ToolCall
from agent_core.llm.tokens import estimate_message, estimate_messages
from agent_core.memory.window import SUMMARY_HEADER, TRIM_MARKER, Window, build_window, group_units

CHAT = "c_window"
SYSTEM = "You are a careful assistant."
T0 = 1_700_000_000_000
BIG = 10_000_000


def user(text: str) -> Message:
    return Message(id=sortable_id(), chat_id=CHAT, role=Role.USER, content=text, created_at=T0)


def assistant(text: str = "", calls: list[str] | None = None) -> Message:
    tool_calls = [ToolCall(id=c, name="lookup", arguments=f'{{"q":"{c}"}}') for c in calls or []]
    return Message(
        id=sortable_id(), chat_id=CHAT, role=Role.ASSISTANT, content=text, tool_calls=tool_calls, created_at=T0
    )


def tool(call_id: str, output: str = "result") -> Message:
    return Message(
        id=sortable_id(),
        chat_id=CHAT,
        role=Role.TOOL,
        content=output,
        tool_call_id=call_id,
        tool_name="lookup",
        created_at=T0,
    )


def a_summary(text: str = "The user lives in Oslo.") -> Summary:
    return Summary(chat_id=CHAT, content=text, covers_message_id="0", updated_at=T0)


def window(
    messages: list[Message],
    max_tokens: int = BIG,
    *,
    summary: Summary | None = None,
    chars: int = 4000,
    extra_system: list[str] | None = None,
) -> Window:
    return build_window(
        SYSTEM, summary, messages, max_tokens=max_tokens, tool_output_chars=chars, extra_system=extra_system
    )


def body(w: Window) -> list[dict[str, Any]]:
    """The window without its system prefix."""
    return [m for m in w.messages if m["role"] != "system"]


def assert_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is followed by exactly its results; every tool result follows its call."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"tool result without its call at {i}: {m}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            wanted = [c["id"] for c in m["tool_calls"]]
            results = [r["tool_call_id"] for r in messages[i + 1 : i + 1 + len(wanted)] if r["role"] == "tool"]
            assert sorted(results) == sorted(wanted), f"call at {i} separated from its results"
            i += 1 + len(wanted)
            continue
        i += 1


def conversation() -> list[Message]:
    """user, assistant(2 calls), 2 results, assistant answer, user, assistant(1 call), result, answer, user."""
    return [
        user("What is the weather in Oslo and in Bergen?"),
        assistant(calls=["c1", "c2"]),
        tool("c1", "Oslo: 3 degrees and cloudy with a light breeze from the north."),
        tool("c2", "Bergen: 7 degrees and rain, as it is most days of the year there."),
        assistant("Oslo is 3 degrees and cloudy; Bergen 7 degrees with rain."),
        user("And in Tromsø?"),
        assistant(calls=["c3"]),
        tool("c3", "Tromsø: -4 degrees and snow."),
        assistant("Tromsø is -4 degrees with snow."),
        user("Thanks!"),
    ]


# ---------------------------------------------------------------- pairing rule


def test_budget_cut_never_separates_a_tool_call_from_its_results() -> None:
    # Given a conversation with two tool-call units
    messages = conversation()
    full = window(messages)

    # When the window is built under every budget from nothing to everything
    for max_tokens in range(0, full.estimated_tokens + 2):
        w = window(messages, max_tokens=max_tokens)

        # Then no tool call is ever separated from its results
        assert_pairs_intact(body(w))


def test_budget_that_fits_the_results_but_not_the_call_drops_the_whole_unit() -> None:
    # Given a tool unit followed by a final answer and a question
    call = assistant(calls=["c3"])
    result = tool("c3", "short")
    answer = assistant("Tromsø is -4 degrees with snow.")
    question = user("Thanks!")
    messages = [call, result, answer, question]
    prefix = estimate_messages(window([]).messages)
    tail = estimate_messages(body(window([answer, question])))
    result_cost = estimate_messages(body(window([call, result]))[1:])
    unit_cost = estimate_messages(body(window([call, result])))

    # When the budget leaves room for the result alone but not for the call with it
    w = window(messages, max_tokens=prefix + tail + result_cost)
    assert result_cost < unit_cost

    # Then neither the call nor its result is in the window
    assert [m["role"] for m in body(w)] == ["assistant", "user"]
    assert body(w)[0]["content"] == answer.content
    assert w.dropped_units == 1


def test_a_tool_call_without_all_its_results_is_dropped() -> None:
    # Given a call for c1 and c2 where only c1 was answered (a run that died mid-step), and one at the end
    messages = [
        user("Compare Oslo and Bergen"),
        assistant(calls=["c1", "c2"]),
        tool("c1"),
        user("Hello again"),
        assistant(calls=["c9"]),
    ]

    # When the window is built with room for everything
    w = window(messages)

    # Then both incomplete units are gone, the user messages remain
    assert body(w) == [
        {"role": "user", "content": "Compare Oslo and Bergen"},
        {"role": "user", "content": "Hello again"},
    ]


def test_orphan_tool_results_are_dropped() -> None:
    # Given tool results without their call: at the start, after a plain answer, and a stray id in a unit
    messages = [
        tool("gone"),
        user("Hi"),
        assistant("Hello."),
        tool("also-gone"),
        assistant(calls=["c1"]),
        tool("c1", "kept"),
        tool("stray", "not asked for"),
        user("Bye"),
    ]

    # When the window is built
    w = window(messages)

    # Then only the answered call's own result survives
    tool_ids = [m["tool_call_id"] for m in body(w) if m["role"] == "tool"]
    assert tool_ids == ["c1"]
    assert_pairs_intact(body(w))
    assert [m["role"] for m in body(w)] == ["user", "assistant", "assistant", "tool", "user"]


# ---------------------------------------------------------------- token budget


@pytest.mark.parametrize("max_tokens", [40, 60, 80, 100, 120, 150, 200, 400])
def test_estimated_tokens_stay_within_the_budget(max_tokens: int) -> None:
    # Given a conversation and a summary
    messages = conversation()

    # When the window is built under the budget
    w = window(messages, max_tokens=max_tokens, summary=a_summary())

    # Then the estimate is the real estimate of what was kept, and within the budget
    assert w.estimated_tokens == estimate_messages(w.messages)
    kept_units = len(group_units(messages)) - w.dropped_units
    if kept_units > 1:
        assert w.estimated_tokens <= max_tokens
    # And the kept part is the newest messages (a suffix of the full body)
    full = body(window(messages))
    assert full[len(full) - len(body(w)) :] == body(w)


def test_the_newest_unit_is_always_kept_even_over_budget() -> None:
    # Given a conversation whose newest unit alone exceeds the budget
    messages = [*conversation()[:-1], user("x" * 2000)]

    # When the window is built with a tiny budget
    w = window(messages, max_tokens=10)

    # Then the newest message is still there, and everything older is dropped
    assert body(w) == [{"role": "user", "content": "x" * 2000}]
    assert w.estimated_tokens > 10
    assert w.dropped_units == len(group_units(messages)) - 1


def test_every_unit_fits_when_the_budget_is_large() -> None:
    # Given a conversation / When the budget is large / Then nothing is dropped
    w = window(conversation())
    assert w.dropped_units == 0
    assert len(body(w)) == 10


# ---------------------------------------------------------------- summary and prefix stability


def test_summary_is_a_system_message_right_after_the_system_prompt() -> None:
    # Given a summary
    w = window(conversation(), summary=a_summary("The user lives in Oslo."))

    # Then the window starts with the system prompt, then the summary, then the conversation
    assert w.messages[0] == {"role": "system", "content": SYSTEM}
    assert w.messages[1] == {"role": "system", "content": f"{SUMMARY_HEADER}\nThe user lives in Oslo."}
    assert w.messages[2]["role"] == "user"


def test_extra_system_blocks_come_between_the_prompt_and_the_summary() -> None:
    # Given extra system blocks (one empty) and a summary
    w = window([user("hi")], summary=a_summary("S"), extra_system=["memory: likes tea", ""])

    # Then the order is prompt, non-empty extras, summary
    assert [m["content"] for m in w.messages[:3]] == [SYSTEM, "memory: likes tea", f"{SUMMARY_HEADER}\nS"]
    assert w.messages[3] == {"role": "user", "content": "hi"}


def test_no_or_empty_summary_adds_no_message() -> None:
    # Given no summary, or one with empty text / Then only the system prompt precedes the conversation
    for s in (None, a_summary("")):
        w = window([user("hi")], summary=s)
        assert w.messages == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]


def test_prefix_is_identical_when_more_messages_arrive() -> None:
    # Given a window over the first messages and a window after more messages arrived (and a budget cut)
    messages = conversation()
    s = a_summary("The user lives in Oslo and likes weather reports.")
    early = window(messages[:5], summary=s)
    later = window(messages, summary=s)
    cut = window(messages, max_tokens=60, summary=s)

    # Then their system prefix (prompt + summary) is byte-for-byte the same (provider prompt caching)
    assert early.messages[:2] == later.messages[:2] == cut.messages[:2]
    assert later.messages[1]["content"].startswith(SUMMARY_HEADER)


# ---------------------------------------------------------------- trimming and kinds


def test_tool_outputs_are_trimmed_with_the_marker() -> None:
    # Given a long tool output, a short one and a long user message
    long_output = "0123456789" * 50
    messages = [
        user("L" * 500),
        assistant(calls=["c1", "c2"]),
        tool("c1", long_output),
        tool("c2", "short"),
    ]

    # When the window keeps 100 characters of tool output
    w = window(messages, chars=100)

    # Then the long output is cut to its head plus the marker; others are untouched
    results = {m["tool_call_id"]: m["content"] for m in body(w) if m["role"] == "tool"}
    assert results["c1"] == long_output[:100] + TRIM_MARKER
    assert results["c2"] == "short"
    assert body(w)[0]["content"] == "L" * 500
    # And the budget is computed on the trimmed text
    assert w.estimated_tokens == estimate_messages(w.messages)
    assert estimate_message(body(w)[2]) < estimate_message({"role": "tool", "content": long_output})


def test_daily_summary_messages_are_excluded() -> None:
    # Given a DAILY_SUMMARY kind message among normal ones
    daily = Message(
        id=sortable_id(), chat_id=CHAT, role=Role.ASSISTANT, kind=Kind.DAILY_SUMMARY, content="Daily: x", created_at=T0
    )
    messages = [user("hi"), daily, assistant("hello")]

    # When the window is built / Then the daily summary is not in it
    w = window(messages)
    assert body(w) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert all("Daily" not in str(m["content"]) for m in w.messages)


def test_assistant_tool_call_is_in_openai_format() -> None:
    # Given an answered tool call with empty text / When windowed / Then the assistant has content None
    w = window([user("q"), assistant(calls=["c1"]), tool("c1", "r")])
    call = body(w)[1]
    assert call["content"] is None
    assert call["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"c1"}'}}
    ]
