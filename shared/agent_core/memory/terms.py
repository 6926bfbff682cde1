"""Words of a text as retrieval sees them: lower-cased word tokens, CJK characters one by one, a light English
stem, and the stop words that carry no topic (so a greeting matches nothing)."""

from __future__ import annotations

import re
from functools import lru_cache

from agent_core.domain.text import CJK_IDEOGRAPHS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(f"[\u3040-\u30ff{CJK_IDEOGRAPHS}\uac00-\ud7af]")  # kana, ideographs, hangul

_STOP = """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just let me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves hi hello
    hey thanks thank ok okay yes yeah oh well really also get got like just im ive id dont didnt doesnt its
    thats whats s t d ll m re ve tell know think good great please sure much many one two
"""
STOP_WORDS = frozenset(_STOP.split())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper (plural, -ing, -ed, -ly): enough to join "hiking"/"hike", "paintings"/"painting"."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("ly", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + keep
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]  # running -> run, planned -> plan
            return base.rstrip("e") if suffix in ("ing", "ed", "es") else base.rstrip("e") or base
    return word.rstrip("e") if len(word) > 4 else word


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes joined: "don't" -> "dont"); each CJK character is a token."""
    out: list[str] = []
    for raw in _WORD.findall(text.lower().replace("'", "").replace("\u2019", "")):
        if _CJK.search(raw):
            out.extend(_split_cjk(raw))
        else:
            out.append(raw)
    return out


def _split_cjk(token: str) -> list[str]:
    parts: list[str] = []
    latin = ""
    for ch in token:
        if _CJK.match(ch):
            if latin:
                parts.append(latin)
                latin = ""
            parts.append(ch)
        else:
            latin += ch
    if latin:
        parts.append(latin)
    return parts


def terms(text: str) -> list[str]:
    """The content terms of a text, stemmed, stop words dropped (in order, repeats kept)."""
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


_SMALL_TALK = """
    today tonight tomorrow yesterday morning evening night afternoon day days week weekend nice cool fine bye goodbye
    see seeing again lol haha hehe welcome sorry glad happy awesome wow whats going doing way thing things lot bit
    time new long dear friend guys everyone chat talk talking soon later wonderful amazing fantastic care take
    catch good morning cheers hows life busy lately back
"""
SMALL_TALK = frozenset(stem(w) for w in _SMALL_TALK.split())
"""Words of greetings and small talk: a record matched only through them is not relevant to a turn."""
