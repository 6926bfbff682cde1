"""The runtime's fixed replies: one rule picks their language, and one module holds them."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

import agent_core
from agent_core.domain.text import has_cjk
from agent_core.memory.time_query import TimeRange
from agent_core.runtime import replies

YESTERDAY = TimeRange(date(2026, 1, 7), date(2026, 1, 7), "yesterday")
LAST_WEEK = TimeRange(date(2026, 1, 1), date(2026, 1, 7), "上周")


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        ("昨天我们聊了什么？", True),
        ("what time is it in 東京?", True),  # one ideograph is enough
        ("\u3400", True),  # CJK Extension A, the range's first character
        ("what did we talk about yesterday?", False),
        ("こんにちは", False),  # kana alone is not an ideograph
        ("", False),
    ],
)
def test_the_language_rule(text: str, chinese: bool) -> None:
    assert has_cjk(text) is chinese


def test_every_reply_follows_the_message_language() -> None:
    zh, en = "北京现在几点？", "what time is it in Beijing?"
    assert replies.filler_line(zh) == "好的，我来逐项查询。\n\n"
    assert replies.filler_line(en) == "Let me look that up.\n\n"
    assert replies.transition(zh) == "另外，"
    assert replies.transition(en) == "Also, "
    assert replies.unoffered_tools(zh, ["ask_user", "time"]) == "（模型想调用此处不可用的工具：ask_user, time。）"
    assert (
        replies.unoffered_tools(en, ["ask_user"])
        == "(The model asked for tools that are not available here: ask_user.)"
    )
    assert replies.max_steps_reached(zh, 3).startswith("（已达到最多 3 步")
    assert replies.max_steps_reached(en, 3).startswith("(Stopped after 3 steps without a final answer.")
    assert replies.nothing_found("上周聊了什么", LAST_WEEK) == "我没有找到上周（2026-01-01 至 2026-01-07）的聊天记录。"
    assert replies.nothing_found(en, YESTERDAY) == "I found no conversations from yesterday (2026-01-07)."


def test_the_ideograph_range_is_written_once() -> None:
    """The ideograph range is written once (domain/text.py); everything else asks `has_cjk` or reuses it."""
    package = Path(agent_core.__file__).parent
    home = package / "domain" / "text.py"
    found = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path != home
        and ("\\u3400" in path.read_text(encoding="utf-8") or "\u3400" in path.read_text(encoding="utf-8"))
    ]
    assert found == []
