"""Quick rules: phrases that must and must not fire each rule, in English and Chinese.

Grow these tables whenever a misfire is found: a quick rule calls a tool with no routing LLM call, so a
false positive runs a tool nobody asked for, and a question *about* a topic is never a request.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core.context import build_registry
from agent_core.memory.time_query import detect, is_history_only
from agent_core.tools.quick_rules import asks_about_topic
from tests.support.fixtures import make_settings

REGISTRY = build_registry(make_settings())
EVERY_TOOL = set(REGISTRY.names())
NOW = datetime(2026, 1, 8, 4, 0, tzinfo=UTC)


def fired(message: str, *, for_model: bool = False) -> list[tuple[str, dict[str, Any]]]:
    return REGISTRY.quick_calls(message, EVERY_TOOL, for_model=for_model)


def fired_names(message: str) -> set[str]:
    return {name for name, _ in fired(message)}


# ----- time: the time or date, now, maybe in a place -----

TIME_FIRES: list[tuple[str, list[str | None]]] = [
    ("what time is it?", [None]),
    ("What time is it in Tokyo?", ["Asia/Tokyo"]),
    ("what time is it in Tokyo and in London?", ["Asia/Tokyo", "Europe/London"]),
    ("What's the time in Paris right now", ["Europe/Paris"]),
    ("what is the current time in New York?", ["America/New_York"]),
    ("tell me the local time in Europe/Berlin", ["Europe/Berlin"]),
    ("What day is it today?", [None]),
    ("what's the date today", [None]),
    ("Do you know what time it is in Sydney?", ["Australia/Sydney"]),
    ("现在几点？", [None]),
    ("东京现在几点", ["Asia/Tokyo"]),
    ("东京和伦敦现在几点了", ["Asia/Tokyo", "Europe/London"]),
    ("帮我看一下上海现在是几点", ["Asia/Shanghai"]),
    ("今天是几号", [None]),
    ("今天星期几？", [None]),
    ("现在几点了？天气如何？", [None]),
    ("告诉我现在的时间", [None]),
    ("伦敦当前时间是多少？", ["Europe/London"]),
    ("现在是什么时间", [None]),
]

TIME_DOES_NOT_FIRE = [
    "How do I get the current time in JavaScript?",
    "how to get the current time in python",
    "What is a time zone?",
    "Explain what time zones are",
    "what is the time complexity of quicksort",
    "What's the time zone of Tokyo?",
    "What's the time difference between Tokyo and London?",
    "current time in JavaScript",
    "Why is the current time in London different from Paris?",
    "What time does the museum open?",
    "I had a great time in Tokyo",
    "用 Python 怎么获取现在几点",
    "如何获取当前时间？",
    "什么是时区",
    "解释一下现在几点这句话的意思",
    "时间过得真快",
    "现在时间过得真快",
    "当前时间戳怎么转换成日期",
]


@pytest.mark.parametrize(("message", "zones"), TIME_FIRES)
def test_time_fires_on_plain_requests_with_one_call_per_place(message: str, zones: list[str | None]) -> None:
    calls = [args for name, args in fired(message) if name == "time"]
    assert [args.get("timezone") for args in calls] == zones


@pytest.mark.parametrize("message", TIME_DOES_NOT_FIRE)
def test_time_does_not_fire_on_questions_about_a_topic(message: str) -> None:
    assert "time" not in fired_names(message)


# ----- save_file: an explicit command at the start of a sentence -----

SAVE_FIRES: list[tuple[str, str, str]] = [
    ("save this as notes.txt: meet at 3pm", "notes.txt", "meet at 3pm"),
    ("Please save the following to data.csv: a,b\n1,2", "data.csv", "a,b\n1,2"),
    ("what time is it? save this as t.txt: now", "t.txt", "now"),
    ("save this as notes.txt: how to bake bread", "notes.txt", "how to bake bread"),
    ("保存为 a.txt：你好", "a.txt", "你好"),
    ("请把这些笔记保存到 n.txt: 明天开会", "n.txt", "明天开会"),
]

SAVE_DOES_NOT_FIRE = [
    "How do I save a file as data.csv in pandas?",
    "how to save it as out.json: with indent",
    "I want to save it as a.txt: x",
    "what time is it? and save it as t.txt: now",
    "save this as notes.txt",
    "What is notes.txt?",
    "如何保存为 a.txt：内容",
    "我昨天保存为 a.txt 了",
]


@pytest.mark.parametrize(("message", "name", "content"), SAVE_FIRES)
def test_save_file_fires_on_a_command_at_a_sentence_start(message: str, name: str, content: str) -> None:
    calls = [args for tool, args in fired(message) if tool == "save_file"]
    assert [(a["name"], a["content"]) for a in calls] == [(name, content)]


@pytest.mark.parametrize("message", SAVE_DOES_NOT_FIRE)
def test_save_file_does_not_fire_elsewhere(message: str) -> None:
    assert "save_file" not in fired_names(message)


# ----- http_get: a fetch request naming a URL -----

FETCH_FIRES = [
    ("fetch https://example.com/a.json", "https://example.com/a.json"),
    ("please open https://example.com.", "https://example.com"),
    ("抓取这个网页 https://example.com/x", "https://example.com/x"),
]

FETCH_DOES_NOT_FIRE = [
    "How do I fetch https://example.com in JavaScript?",
    "explain what fetch https://example.com returns",
    "为什么 获取 https://example.com 会失败",
    "I read https://example.com yesterday",
]


@pytest.mark.parametrize(("message", "url"), FETCH_FIRES)
def test_http_get_fires_on_a_fetch_request(message: str, url: str) -> None:
    assert [args["url"] for name, args in fired(message) if name == "http_get"] == [url]


@pytest.mark.parametrize("message", FETCH_DOES_NOT_FIRE)
def test_http_get_does_not_fire_on_questions_about_fetching(message: str) -> None:
    assert "http_get" not in fired_names(message)


# ----- ask_user (a frontend tool): never a quick rule, only the model -----

ASK_USER_PHRASES = [
    'ask me to pick "tea" or "coffee"',
    "ask me anything",
    "让我选一个",
    "Please ask me nothing, just explain what ask me anything (AMA) means",
]


@pytest.mark.parametrize("message", ASK_USER_PHRASES)
def test_frontend_tools_never_fire_by_a_quick_rule(message: str) -> None:
    assert "ask_user" not in fired_names(message)


def test_the_offline_model_may_still_choose_a_frontend_tool_but_not_for_a_question_about_one() -> None:
    assert [name for name, _ in fired('ask me to pick "tea" or "coffee"', for_model=True)] == ["ask_user"]
    explain = "Please ask me nothing, just explain what ask me anything (AMA) means"
    assert fired(explain, for_model=True) == []


# ----- the history fast path: the whole message is about past conversations -----

HISTORY_ONLY = [
    "昨天我们聊了什么？",
    "你还记得昨天我们说的吗",
    "昨天我们聊了什么，具体说了哪些药？",
    "昨天聊了什么，详细一点",
    "What did we discuss yesterday?",
    "What did we discuss yesterday and the day before?",
    "what did we talk about yesterday? thanks",
    "Summarise what we discussed last week, please.",
]

HISTORY_MIXED = [
    "昨天聊了什么，今天北京天气怎样？",
    "昨天聊了什么？另外现在几点",
    "What did we talk about yesterday, and what is the weather in Paris?",
    "what did we discuss yesterday, and what time is it in Tokyo?",
]


@pytest.mark.parametrize("message", HISTORY_ONLY)
def test_history_fast_path_takes_a_message_that_is_all_about_past_conversations(message: str) -> None:
    assert detect(message, "Asia/Shanghai", NOW) is not None and is_history_only(message)


@pytest.mark.parametrize("message", HISTORY_MIXED)
def test_a_mixed_message_is_not_taken_whole_by_the_history_fast_path(message: str) -> None:
    assert detect(message, "Asia/Shanghai", NOW) is not None and not is_history_only(message)


@pytest.mark.parametrize(
    ("text", "about"),
    [
        ("今天北京天气怎样", False),
        ("天气如何？", False),
        ("东京现在几点", False),
        ("怎么样", False),
        ("怎么获取时间", True),
        ("What does AMA mean", True),
        ("tell me about Tokyo", True),
        ("what time is it", False),
    ],
)
def test_asks_about_topic(text: str, about: bool) -> None:
    assert asks_about_topic(text) is about
