"""Rule-based detection of "what did we talk about <time>?" questions (no LLM).

`detect` fires only when a message both asks about past conversation (a cue such as 聊了什么 /
"talked about") and names a time (昨天, "3 days ago", 上周, 1月7日, 周一, ...). It returns the
inclusive range of local calendar days the time words mean, so the caller can pull the matching
history without asking a model. `parse_range_args` runs the same time-word rules for a tool's
arguments, and `is_detail_question` spots questions that need the raw messages rather than a
summary (具体, 原话, "exactly", "how much", ...).

Every date is relative to *today* in the user's IANA zone: `now` (any zone; a naive value is read
as UTC) is converted to that zone first, so 00:30 in Shanghai is already the next day while New
York is still on the previous one. An unknown zone falls back to UTC instead of raising.

Time meanings (``today`` is the local date; ranges are inclusive):

- 今天/今日/今早/今晚/today/tonight/this morning: today; 昨天/昨日/昨晚/yesterday/last night: -1;
  前天/"the day before yesterday": -2; 大前天: -3.
- N天前 / "N days ago" (digits, 一..十 with 两, one..twelve, "a day ago"): today - N.
- 最近N天/过去N天/这N天/"the last N days": N days through today (today - (N-1) .. today).
- 上周/上星期/上礼拜/"last week"/"past week": the 7 days ending yesterday (today-7 .. today-1);
  上上周: the 7 days before that (today-14 .. today-8).
- 这周/本周/"this week": Monday of this week .. today.
- 上个月/上月/"last month": the month ending yesterday: start is the same day-of-month one
  calendar month earlier, clamped to that month's length (on March 31 it is February 28/29),
  end is yesterday.
- 这个月/本月/"this month": the 1st of this month .. today.
- Weekdays 周一..周日, 星期一..星期日/天, 礼拜一..礼拜天, "Monday", "on Monday": the most recent such
  day not after today (today counts); "last Monday": the most recent one strictly before today;
  上周一 / 这周一 / "this Monday": that weekday in the previous / current Monday-based week.
- 周末/"weekend": the most recent Saturday-Sunday (clipped to today); 上周末/"last weekend": the
  Saturday-Sunday before this week's Monday.
- Dates: 1月7日/1月7号/一月七日, 2025年1月7日, ISO 2026-01-07, "January 7", "Jan 7th",
  "7 January", "the 7th of January", "January 7, 2025". Without a year, a month/day later than
  today means the most recent earlier year that has that date. 7号/7日/"the 7th": that day of the
  current month, or of the most recent earlier month that has it if it is after today.
- Months: 1月/12月份/2025年3月, "in December": the whole month, the most recent one not after this
  month, clipped to today.

When several time words appear (昨天和前天, "Monday to Wednesday") the result spans all of them.

Vague times, only when no day is named:

- 上次/上一次/上回/"last time": the most recent day with records among the 30 days before today
  (`TimeRange.latest`; the lookup picks that day). Today is left out: it holds the question itself.
- 之前/以前/先前/此前/"before"/"earlier"/"previously"/"so far": the last 7 days through today
  (today-6 .. today), like 最近7天.
Traditional characters (聊過, 上週, 這個月, ...) are read like their simplified forms.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache
from itertools import pairwise
from typing import TypeAlias

from agent_core.domain.text import CJK_IDEOGRAPHS
from agent_core.memory.calendar import zone

__all__ = ["TimeRange", "detect", "is_detail_question", "is_history_only", "parse_range_args"]


@dataclass(frozen=True)
class TimeRange:
    """Inclusive range of local calendar days, and the time words in the message that gave it."""

    start: date
    end: date
    phrase: str
    latest: bool = False  # only the most recent day in the range that has records (上次, "last time")

    def label(self, joiner: str = "to") -> str:
        """`2026-01-07` for one day, `2026-01-05 to 2026-01-07` for several."""
        if self.start == self.end:
            return self.start.isoformat()
        return f"{self.start} {joiner} {self.end}" if joiner != ".." else f"{self.start}..{self.end}"


Span: TypeAlias = tuple[date, date]
Resolver: TypeAlias = Callable[[re.Match[str], date], Span | None]

# --- text normalisation ------------------------------------------------------------------------

# One character for one character, so match offsets stay valid for the original text.
_TRADITIONAL = "週這個過說討論談講問禮號兩麼記錄對話還幾錢體點們溝"
_SIMPLIFIED = "周这个过说讨论谈讲问礼号两么记录对话还几钱体点们沟"
_T2S = str.maketrans(_TRADITIONAL, _SIMPLIFIED)


def _normalise(text: str) -> str:
    """Map traditional characters the rules care about to simplified ones (length-preserving)."""
    return text.translate(_T2S)


def _en(pattern: str) -> str:
    """Wrap an English pattern in ASCII word edges (``\\b`` fails next to CJK characters)."""
    return rf"(?<![A-Za-z0-9])(?:{pattern})(?![A-Za-z0-9])"


# --- numbers ----------------------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_ZH_N = r"(?:\d{1,4}|[零〇一二两三四五六七八九十]{1,3})"
_EN_N = r"(?:\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_ZH_DAY_N = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
_ZH_MONTH_N = r"(?:\d{1,2}|十[一二]?|[一二三四五六七八九])"
_NOT_NUMBER_BEFORE = r"(?<![\d零〇一二两三四五六七八九十])"


def _to_int(text: str) -> int | None:
    """Parse digits, an English number word, or a Chinese numeral below 100 (十七, 二十一, 两)."""
    text = text.strip()
    if text.isdecimal():
        return int(text)
    if text.lower() in _EN_NUMBERS:
        return _EN_NUMBERS[text.lower()]
    if "十" in text:
        head, _, tail = text.partition("十")
        if len(head) > 1 or len(tail) > 1:
            return None
        tens = _ZH_DIGITS.get(head) if head else 1
        ones = _ZH_DIGITS.get(tail) if tail else 0
        if tens is None or ones is None:
            return None
        return tens * 10 + ones
    if len(text) == 1:
        return _ZH_DIGITS.get(text)
    return None


# --- calendar helpers -------------------------------------------------------------------------

_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH_RE = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
# 周一 but not 周一直/一起/一样... (这周一直很忙 is not "this Monday").
_ZH_WEEKDAY = r"(?:一(?![直起样共定些次下点般切])|[二三四五六日天])"
_ZH_WEEK = r"(?:周|星期|礼拜)"


def _day(d: date) -> Span:
    return d, d


def _monday(today: date) -> date:
    return today - timedelta(days=today.weekday())


def _month_length(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _one_month_earlier(d: date) -> date:
    """The same day-of-month one calendar month earlier, clamped to that month's length."""
    year, month = (d.year, d.month - 1) if d.month > 1 else (d.year - 1, 12)
    return date(year, month, min(d.day, _month_length(year, month)))


def _month_day(month: int, day: int, year: int | None, today: date) -> date | None:
    """A month/day: in ``year`` if given, else the most recent one not after today."""
    if year is not None:
        try:
            return date(year, month, day)
        except ValueError:
            return None
    for candidate_year in range(today.year, today.year - 9, -1):  # 9 years always include a Feb 29
        try:
            candidate = date(candidate_year, month, day)
        except ValueError:
            continue
        if candidate <= today:
            return candidate
    return None


def _day_of_month(day: int, today: date) -> date | None:
    """Day ``day`` of this month, or of the most recent earlier month that has it, not after today."""
    if not 1 <= day <= 31:
        return None
    year, month = today.year, today.month
    for _ in range(13):
        if day <= _month_length(year, month) and date(year, month, day) <= today:
            return date(year, month, day)
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return None


def _whole_month(month: int, year: int | None, today: date) -> Span | None:
    """A calendar month (the most recent one not after this month if no year), clipped to today."""
    if not 1 <= month <= 12:
        return None
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    start = date(year, month, 1)
    end = min(date(year, month, _month_length(year, month)), today)
    return (start, end) if start <= end else None


def _latest_weekday(weekday: int, today: date, *, strictly_before: bool = False) -> date:
    back = (today.weekday() - weekday) % 7
    if back == 0 and strictly_before:
        back = 7
    return today - timedelta(days=back)


def _latest_weekend(today: date) -> Span:
    saturday = today - timedelta(days=(today.weekday() - 5) % 7)
    return saturday, min(saturday + timedelta(days=1), today)


# --- resolvers --------------------------------------------------------------------------------


def _days_ago(n: int) -> Resolver:
    def resolve(_match: re.Match[str], today: date) -> Span:
        return _day(today - timedelta(days=n))

    return resolve


def _n_days_ago(match: re.Match[str], today: date) -> Span | None:
    n = _to_int(match["n"])
    return None if n is None else _day(today - timedelta(days=n))


def _last_n_days(match: re.Match[str], today: date) -> Span | None:
    n = _to_int(match["n"])
    return None if n is None or n < 1 else (today - timedelta(days=n - 1), today)


def _last_week(_match: re.Match[str], today: date) -> Span:
    return today - timedelta(days=7), today - timedelta(days=1)


def _week_before_last(_match: re.Match[str], today: date) -> Span:
    return today - timedelta(days=14), today - timedelta(days=8)


def _this_week(_match: re.Match[str], today: date) -> Span:
    return _monday(today), today


def _last_month(_match: re.Match[str], today: date) -> Span:
    return _one_month_earlier(today), today - timedelta(days=1)


def _this_month(_match: re.Match[str], today: date) -> Span:
    return today.replace(day=1), today


def _weekday_index(match: re.Match[str]) -> int:
    name = match["wd"].lower()
    return _WEEKDAYS_ZH[name] if name in _WEEKDAYS_ZH else _WEEKDAYS_EN.index(name)


def _weekday(match: re.Match[str], today: date) -> Span:
    return _day(_latest_weekday(_weekday_index(match), today))


def _last_weekday_en(match: re.Match[str], today: date) -> Span:
    return _day(_latest_weekday(_weekday_index(match), today, strictly_before=True))


def _weekday_last_week(match: re.Match[str], today: date) -> Span:
    return _day(_monday(today) - timedelta(days=7 - _weekday_index(match)))


def _weekday_this_week(match: re.Match[str], today: date) -> Span:
    return _day(_monday(today) + timedelta(days=_weekday_index(match)))


def _weekend(_match: re.Match[str], today: date) -> Span:
    return _latest_weekend(today)


def _last_weekend(_match: re.Match[str], today: date) -> Span:
    monday = _monday(today)
    return monday - timedelta(days=2), monday - timedelta(days=1)


def _optional_year(match: re.Match[str]) -> int | None:
    year = match.groupdict().get("y")
    return int(year) if year else None


def _numeric_date(match: re.Match[str], today: date) -> Span | None:
    month, day = _to_int(match["m"]), _to_int(match["d"])
    if month is None or day is None:
        return None
    found = _month_day(month, day, _optional_year(match), today)
    return None if found is None else _day(found)


def _named_month_date(match: re.Match[str], today: date) -> Span | None:
    day = _to_int(match["d"])
    if day is None:
        return None
    found = _month_day(_MONTHS[match["mon"][:3].lower()], day, _optional_year(match), today)
    return None if found is None else _day(found)


def _bare_day(match: re.Match[str], today: date) -> Span | None:
    day = _to_int(match["d"])
    found = None if day is None else _day_of_month(day, today)
    return None if found is None else _day(found)


def _numeric_month(match: re.Match[str], today: date) -> Span | None:
    month = _to_int(match["m"])
    return None if month is None else _whole_month(month, _optional_year(match), today)


def _named_month(match: re.Match[str], today: date) -> Span | None:
    return _whole_month(_MONTHS[match["mon"][:3].lower()], _optional_year(match), today)


# --- the rules --------------------------------------------------------------------------------

_WEEKDAY_EN_RE = "(?P<wd>" + "|".join(_WEEKDAYS_EN) + ")"

# Overlaps are settled by position, not by list order: the leftmost match wins and, at the same
# position, the longest, so 大前天 beats 前天, "the day before yesterday" beats "yesterday" and
# 上周一 beats 上周. Lookbehinds keep the shorter forms from matching inside the longer ones anyway.
_RULE_SOURCES: list[tuple[str, Resolver]] = [
    (r"今天|今日|今早|今晚|今儿", _days_ago(0)),
    (_en(r"today|tonight|this\s+(?:morning|afternoon|evening)"), _days_ago(0)),
    (r"昨天|昨日|昨晚|昨夜|昨儿", _days_ago(1)),
    (_en(r"yesterday|last\s+night"), _days_ago(1)),
    (r"(?<![大以之])前天(?!气)", _days_ago(2)),
    (_en(r"(?:the\s+)?day\s+before\s+yesterday"), _days_ago(2)),
    (r"大前天", _days_ago(3)),
    (rf"(?P<n>{_ZH_N})\s*个?[天日]\s*[以之]?前", _n_days_ago),
    (_en(rf"(?P<n>{_EN_N})\s+days?\s+ago"), _n_days_ago),
    (rf"(?:最近|过去|近|这)\s*(?P<n>{_ZH_N})\s*[天日]", _last_n_days),
    (_en(rf"(?:last|past|previous)\s+(?P<n>{_EN_N})\s+days"), _last_n_days),
    (rf"(?<!上)上个?{_ZH_WEEK}(?!末)", _last_week),
    (_en(r"(?:last|past|previous)\s+week"), _last_week),
    (rf"上上个?{_ZH_WEEK}(?!末)", _week_before_last),
    (_en(r"(?:the\s+)?week\s+before\s+last"), _week_before_last),
    (rf"这个?{_ZH_WEEK}(?!末)|本{_ZH_WEEK}(?!末)", _this_week),
    (_en(r"this\s+week"), _this_week),
    (r"上个?月", _last_month),
    (_en(r"(?:last|past|previous)\s+month"), _last_month),
    (r"这个?月|本月", _this_month),
    (_en(r"this\s+month"), _this_month),
    (rf"(?<![每上这本个]){_ZH_WEEK}(?P<wd>{_ZH_WEEKDAY})", _weekday),
    (_en(_WEEKDAY_EN_RE), _weekday),
    (_en(rf"last\s+{_WEEKDAY_EN_RE}"), _last_weekday_en),
    (rf"(?<!上)上个?{_ZH_WEEK}(?P<wd>{_ZH_WEEKDAY})", _weekday_last_week),
    (rf"(?:这个?|本){_ZH_WEEK}(?P<wd>{_ZH_WEEKDAY})", _weekday_this_week),
    (_en(rf"this\s+{_WEEKDAY_EN_RE}"), _weekday_this_week),
    (r"(?:这个?|本)?周末", _weekend),
    (_en(r"(?:this\s+|the\s+)?weekend"), _weekend),
    (r"上个?周末", _last_weekend),
    (_en(r"last\s+weekend"), _last_weekend),
    (
        rf"{_NOT_NUMBER_BEFORE}(?:(?P<y>\d{{4}})\s*年\s*)?(?P<m>{_ZH_MONTH_N})\s*月\s*(?P<d>{_ZH_DAY_N})\s*[日号]?(?!\d)",
        _numeric_date,
    ),
    (r"(?<!\d)(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?!\d)", _numeric_date),
    (
        _en(rf"(?P<mon>{_MONTH_RE})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{{4}}))?"),
        _named_month_date,
    ),
    (
        _en(rf"(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_RE})(?:,?\s+(?P<y>\d{{4}}))?"),
        _named_month_date,
    ),
    (rf"(?<![\d零〇一二两三四五六七八九十月第])(?P<d>{_ZH_DAY_N})\s*[日号]", _bare_day),
    (_en(r"the\s+(?P<d>\d{1,2})(?:st|nd|rd|th)"), _bare_day),
    (
        rf"{_NOT_NUMBER_BEFORE}(?:(?P<y>\d{{4}})\s*年\s*)?(?P<m>{_ZH_MONTH_N})\s*月份?(?!\s*[\d零〇一二两三四五六七八九十])",
        _numeric_month,
    ),
    (
        _en(rf"(?:in|during)\s+(?P<mon>{_MONTH_RE})(?:\s+(?P<y>\d{{4}})(?!\d)|(?!\.?\s*\d))"),
        _named_month,
    ),
]


@cache
def _rules() -> list[tuple[re.Pattern[str], Resolver]]:
    """Compiled on first use: the patterns cost ~20 ms, which stays off the Lambda cold start."""
    return [(re.compile(source, re.IGNORECASE), resolve) for source, resolve in _RULE_SOURCES]


# --- cues -------------------------------------------------------------------------------------

_ZH_TALK = r"(?:(?<!无)聊|谈|说|讲|讨论|提到|提|问|交流|沟通)"
_CUE_PATTERNS = (
    # 聊了什么, 聊了些什么, 聊了啥, 聊的什么, 说过什么, 讨论了哪些 ...
    rf"{_ZH_TALK}[了过的]些?(?:什么|啥|哪些)",
    # 聊过, 说过, 问过, 提到过, 讨论过 ...
    rf"{_ZH_TALK}过",
    # 我们昨天聊了 X / 讨论的那个 (verbs that only mean conversation)
    r"(?:(?<!无)聊|谈|讨论|交流|沟通)[了的]",
    r"聊天记录|对话记录|聊天内容|对话内容|我们的对话|还记得",
    # 我说的药, 我们聊的那个, 我提到的, 我问过的 (what I said: a question about the conversation)
    r"(?<![你他她它])我们?(?:说|讲|提到?|问|聊)[过了]?的",
    _en(
        r"talk(?:s|ed|ing)?(?:\s+\S+){0,3}?\s+about|talked|spoke|chatted"
        r"|chat(?:s|ted|ting)?(?:\s+\S+){0,3}?\s+about|(?:our|the)\s+chats?|chat\s+(?:history|log)"
        r"|discuss(?:es|ed|ing)?|discussion|conversations?"
        r"|say|says|said|mention(?:s|ed)?|told|asked"
    ),
)


@cache
def _cue() -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in _CUE_PATTERNS), re.IGNORECASE)


@cache
def _detail() -> re.Pattern[str]:
    return re.compile(
        r"具体|原话|原文|叫什么|叫啥|多少钱|几点|确切|一字不差|逐字"
        + "|"
        + _en(
            r"exact(?:ly)?|precise(?:ly)?|verbatim|word[\s-]for[\s-]word|how\s+much|what\s+time"
            r"|what(?:\s+was|\s+is|'s|’s)\s+(?:the|its|his|her|their)\s+name"
        ),
        re.IGNORECASE,
    )


# --- vague times: "before", "last time" (no day named) ---------------------------------------------

RECENT_DAYS = 7  # 之前 / "before": the last 7 days through today
LAST_TIME_DAYS = 30  # 上次 / "last time": the latest day with records among the 30 before today
_LAST_TIME = r"上一?次|上一?回|" + _en(r"(?:the\s+)?last\s+time")
_BEFORE = r"之前|以前|先前|此前|" + _en(r"before|earlier|previously|so\s+far")


@cache
def _vague() -> list[tuple[re.Pattern[str], bool]]:
    return [(re.compile(_LAST_TIME, re.IGNORECASE), True), (re.compile(_BEFORE, re.IGNORECASE), False)]


def _vague_time(text: str, today: date) -> TimeRange | None:
    """上次 / "last time": the latest day with records in the LAST_TIME_DAYS before today (`latest`);
    之前 / 以前 / "before" / "earlier": the last RECENT_DAYS days through today. Used only when no day is named."""
    normalised = _normalise(text)
    for pattern, latest in _vague():
        match = pattern.search(normalised)
        if match is None:
            continue
        phrase = text[match.start() : match.end()].strip()
        if latest:
            return TimeRange(today - timedelta(days=LAST_TIME_DAYS), today - timedelta(days=1), phrase, latest=True)
        return TimeRange(today - timedelta(days=RECENT_DAYS - 1), today, phrase)
    return None


# Gaps this short between two time words (到, " to ", " and ", "-") keep them as one phrase.
_JOIN_GAP = 8


# --- public API -------------------------------------------------------------------------------


def _today(timezone: str, now: datetime) -> date:
    """Today's date in ``timezone`` at instant ``now`` (a naive ``now`` is taken as UTC)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(zone(timezone, "UTC")).date()


def _find_time(text: str, today: date) -> TimeRange | None:
    """All time words in ``text``, leftmost-longest and non-overlapping, as one spanning range."""
    normalised = _normalise(text)
    hits: list[tuple[int, int, date, date]] = []
    for pattern, resolve in _rules():
        for match in pattern.finditer(normalised):
            span = resolve(match, today)
            if span is not None:
                hits.append((match.start(), match.end(), *span))
    if not hits:
        return None
    hits.sort(key=lambda hit: (hit[0], hit[0] - hit[1]))
    chosen: list[tuple[int, int, date, date]] = []
    for hit in hits:
        if not chosen or hit[0] >= chosen[-1][1]:
            chosen.append(hit)
    gaps_short = all(nxt[0] - prev[1] <= _JOIN_GAP for prev, nxt in pairwise(chosen))
    if gaps_short:
        phrase = text[chosen[0][0] : chosen[-1][1]]
    else:
        phrase = ", ".join(text[start:end].strip() for start, end, _, _ in chosen)
    return TimeRange(
        start=min(hit[2] for hit in chosen),
        end=max(hit[3] for hit in chosen),
        phrase=phrase.strip(),
    )


def detect(message: str, timezone: str, now: datetime) -> TimeRange | None:
    """The days a question about past conversation refers to, or None.

    Fires only when ``message`` both asks about past conversation (聊了什么, 说过, 讨论过,
    "talked about", "discussed", "said", "mentioned", 我说的, ...) and names a time (see the module
    docstring for every form and its meaning). Without a named day, 上次 / "last time" and 之前 /
    以前 / "before" / "earlier" give the vague ranges of the module docstring. A time word alone
    (今天天气怎么样, "what's the weather today") is not a question about history: it gives None.

    Args:
        message: the user's message.
        timezone: the user's IANA zone; today is ``now`` converted to it (unknown zones: UTC).
        now: the current instant, timezone-aware in any zone.
    """
    if not message or not _cue().search(_normalise(message)):
        return None
    today = _today(timezone, now)
    return _find_time(message, today) or _vague_time(message, today)


# A history question may carry clauses that add nothing but politeness or time words ("and the day
# before?", "详细一点"); a clause with more than this is another request ("今天北京天气怎样").
_CLAUSE_SPLIT = re.compile(r"[，,。？！?!;；\n]|\b(?:and\s+also|and|also|plus|then|but)\b|另外|还有|顺便|以及|然后")
_FILLER_EN = frozenset(
    re.split(
        r"\s+",
        "a an the and also please thanks thank you we us i me my our did do does what about that this it "
        "then so ok okay hey hi again remind tell day days week weeks month months before after ago earlier "
        "last morning night evening afternoon today yesterday tonight more detail details briefly",
    )
)
_FILLER_ZH = re.compile(
    r"我们|你|我|请|谢谢|详细|具体|一点|一下|简单|总结|说说|告诉|呢|吗|吧|啊|呀|了|的|和|再|都|也|那|这"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")
_HAN = re.compile(f"[{CJK_IDEOGRAPHS}]")


def _other_request(clause: str) -> bool:
    """A clause with no history cue that still asks for something (two words, or three Han characters)."""
    text = _normalise(clause)
    for pattern in [rule for rule, _ in _rules()] + [vague for vague, _ in _vague()]:
        text = pattern.sub(" ", text)
    words = [w for w in _WORD.findall(text.lower()) if w.strip("'") not in _FILLER_EN]
    han = _HAN.findall(_FILLER_ZH.sub("", text))
    return len(words) >= 2 or len(han) >= 3


def is_history_only(message: str) -> bool:
    """Whether every clause of the message is about past conversations (the fast path may take it whole).

    "昨天聊了什么？" is; "昨天聊了什么，今天北京天气怎样？" and "what did we discuss yesterday, and
    what time is it in Tokyo?" are not: their other clause is a request of its own.
    """
    cue = _cue()
    for clause in _CLAUSE_SPLIT.split(message):
        if clause.strip() and not cue.search(_normalise(clause)) and _other_request(clause):
            return False
    return True


def is_detail_question(message: str) -> bool:
    """Whether the message asks for specifics a summary may have lost.

    Matches 具体, 原话, 叫什么, 多少钱, 几点 (and 原文, 确切, ...) and, as whole words in any case,
    "exactly"/"the exact", "precisely", "verbatim", "what was the name", "how much", "what time".
    """
    return bool(message) and _detail().search(_normalise(message)) is not None


def _parse_iso_date(value: str, name: str, zone: tzinfo) -> date:
    """An ISO date (or datetime, converted to ``zone`` if it carries an offset)."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{name} must be an ISO date such as 2026-01-07, got {value!r}") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(zone)
    return moment.date()


def parse_range_args(
    time_range: str | None,
    start: str | None,
    end: str | None,
    timezone: str,
    now: datetime,
) -> TimeRange:
    """A tool's time arguments as a TimeRange: either a phrase or ISO start/end dates.

    ``time_range`` ("yesterday", "上周", "3 days ago", "2026-01-07", ...) goes through the same
    time-word rules as `detect`, without needing a past-conversation cue. Otherwise ``start`` is
    required and ``end`` defaults to today (both inclusive, local to ``timezone``).

    Raises:
        ValueError: with a message fit to show the model: nothing given, both forms given, a
            phrase with no recognisable time, a malformed date, or start after end.
    """
    phrase = (time_range or "").strip()
    start_text = (start or "").strip()
    end_text = (end or "").strip()
    tz = zone(timezone, "UTC")
    today = _today(timezone, now)
    if phrase and (start_text or end_text):
        raise ValueError("give either time_range or start/end, not both")
    if phrase:
        found = _find_time(phrase, today) or _vague_time(phrase, today)
        if found is None:
            raise ValueError(
                f"could not understand time_range {phrase!r}; use a phrase such as 'today', 'yesterday', "
                "'3 days ago', 'last week', '上周', '1月7日', or give ISO dates in start/end"
            )
        return found
    if not start_text:
        if end_text:
            raise ValueError("end was given without start; give start too (ISO date such as 2026-01-07)")
        raise ValueError("give time_range (e.g. 'yesterday', '上周') or start and optionally end as ISO dates")
    first = _parse_iso_date(start_text, "start", tz)
    last = _parse_iso_date(end_text, "end", tz) if end_text else today
    if first > last:
        what = "end" if end_text else "today"
        raise ValueError(f"start {first.isoformat()} is after {what} {last.isoformat()}")
    return TimeRange(start=first, end=last, phrase=f"{first.isoformat()}..{last.isoformat()}")
