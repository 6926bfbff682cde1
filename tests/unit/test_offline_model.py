"""The offline model answers from the records its prompt carries, deterministically, with no API key."""

from __future__ import annotations

from agent_core.domain.models import Profile, ProfileFact, Summary
from agent_core.llm.base import LlmRequest
from agent_core.llm.offline import OfflineLlm
from agent_core.memory.profile import profile_block
from agent_core.memory.window import build_window


async def _answer(messages: list[dict[str, object]]) -> str:
    request = LlmRequest(model="m", messages=messages)
    return "".join([d.content async for d in OfflineLlm().stream(request) if d.content])


async def test_without_records_it_says_back_the_question() -> None:
    answer = await _answer([{"role": "system", "content": "You help."}, {"role": "user", "content": "hello"}])
    assert answer == "[offline model] You said: hello"


async def test_it_quotes_the_profile_and_rolling_summary_the_window_holds_every_time_the_same() -> None:
    profile = Profile(
        user_id="u", facts=[ProfileFact(aspect="budget", key="trip", value="about 8000 CNY", source_date="2026-01-07")]
    )
    summary = Summary(
        chat_id="c", content="The user plans a Kyoto trip in April.", covers_message_id="m1", updated_at=0
    )
    window = build_window(
        "You help.", summary, [], max_tokens=4000, tool_output_chars=1000, extra_system=[profile_block(profile)]
    )
    messages = [*window.messages, {"role": "user", "content": "what do you know about me?"}]
    first, second = await _answer(messages), await _answer(messages)
    assert first == second
    assert first.startswith("[offline model] You said: what do you know about me?\nFrom the records I was given:")
    assert "budget: trip: about 8000 CNY (2026-01-07)" in first and "Kyoto trip in April" in first
    assert "You help." not in first, "the instructions are not records"


def test_the_offline_model_extracts_profile_facts_the_user_states() -> None:
    from agent_core.llm.offline import extract_facts

    text = (
        "User: I like hiking in the Alps, and I'm allergic to peanuts.\n"
        "Assistant: I love long answers.\n"
        "User: My favourite colour is green. I am allergic to shellfish!\n"
        "User: my budget is about 8000 CNY"
    )
    facts = {(f["aspect"], f["key"]): f["value"] for f in extract_facts(text)}
    assert facts == {
        ("interests", "hiking"): "I like hiking in the Alps",
        ("constraints", "allergy to peanuts"): "allergic to peanuts",
        ("constraints", "allergy to shellfish"): "allergic to shellfish",
        ("preferences", "favourite colour"): "green",
        ("budget", "budget"): "about 8000 CNY",
    }  # the assistant's "I love" is not the user's fact
    assert extract_facts("User: Hello there! How are you?") == []
