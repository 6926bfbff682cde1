"""When a quick rule may fire: the message plainly asks for a tool's result now, not about a topic.

A quick rule (a tool's `quick_match`, or an agent's override) calls the tool with no routing LLM call,
so it must not misfire. A match counts only when the sentence it sits in is not a question *about*
something: "how do I get the current time in JavaScript?", "explain what AMA means", 如何/怎么/什么是/
解释 ... are questions for the model, not requests for a tool's result. Text after a colon in or after
the match is a command's payload ("save this as notes.txt: how to bake bread") and is not inspected.
"""

from __future__ import annotations

import re
from functools import cache

from agent_core.domain.text import CJK_IDEOGRAPHS as _CJK

# Sentence ends: ? ! 。 ？ ！ ; ； newlines, and a full stop followed by a space or the end.
_SENTENCE_END = re.compile(r"[?!。？！;；\n]|\.(?=\s|$)")
_COLON = re.compile(r"[:：]")

_ABOUT_EN = (
    r"\bhow\s+(?:do|does|did|can|could|would|should|might|to)\b",
    r"\bexplain|\bexplanation\b|\bdescribe\b|\bdefin(?:e|ition)\b|\bmeaning\b|\bmeans?\b",
    r"\bwhat\s+(?:is|are|was|were)\s+(?:a|an)\b|\bwhat\s+does\b|\bdifference\s+between\b",
    r"\bwhy\b|\btutorial\b|\btell\s+me\s+about\b|\bexample\s+of\b",
    # questions about code are questions for the model
    r"\b(?:javascript|typescript|python|java|golang|rust|php|ruby|swift|kotlin|sql|bash|shell|powershell"
    r"|excel|regex|pandas|numpy|api|sdk|library|function|code|script|programming)\b|c\+\+|c#|node\.js",
)
_ABOUT_ZH = (
    # 如何/怎么/怎样 + a verb is "how to"; 天气如何？/ 怎么样 is "how is it" (a request)
    rf"如何(?=[{_CJK}])(?![呢啊吗呀了])",
    rf"怎么(?!样|了|回事)(?=[{_CJK}])",
    rf"怎样(?=[{_CJK}])(?![呢啊吗呀了])",
    r"什么是|是什么意思|什么意思|的意思|含义|解释|为什么|原理|区别|教程|用法|定义|代码|编程|函数|脚本",
)


@cache
def _about() -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in (*_ABOUT_EN, *_ABOUT_ZH)), re.IGNORECASE)


def asks_about_topic(text: str) -> bool:
    """Whether the text is a question about a topic (how to, what is, explain, 如何, 什么是 ...)."""
    return _about().search(text) is not None


def sentence_of(message: str, start: int, end: int) -> str:
    """The sentence holding message[start:end], cut at the first colon from the match on (a payload)."""
    begin = 0
    for found in _SENTENCE_END.finditer(message, 0, start):
        begin = found.end()
    stop = len(message)
    colon = _COLON.search(message, start)
    sentence_end = _SENTENCE_END.search(message, end)
    for candidate in (colon, sentence_end):
        if candidate is not None:
            stop = min(stop, candidate.start())
    return message[begin:stop]


def requested(rule: re.Pattern[str], message: str) -> re.Match[str] | None:
    """The first match of `rule` whose sentence plainly asks for the result (not about a topic)."""
    for match in rule.finditer(message):
        if not asks_about_topic(sentence_of(message, match.start(), match.end())):
            return match
    return None
