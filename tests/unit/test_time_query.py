"""time_query: past-conversation time detection, local "today" per zone, detail questions, tool args."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent_core.memory.time_query import TimeRange, detect, is_detail_question, parse_range_args

# 2026-01-08T16:30Z is 00:30 on Friday the 9th in Shanghai, 11:30 on Thursday the 8th in New York,
# 22:00 on the 8th in Kolkata and 22:15 on the 8th in Kathmandu.
NOW = datetime(2026, 1, 8, 16, 30, tzinfo=UTC)
ZONES = ["Asia/Shanghai", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu"]
SHANGHAI = "Asia/Shanghai"


def local_today(zone: str, now: datetime = NOW) -> date:
    """The reference 'today' computed independently of the module under test."""
    return now.astimezone(ZoneInfo(zone)).date()


def at(zone: str, year: int, month: int, day: int, hour: int = 12) -> datetime:
    """A clock reading local ``hour`` on the given day in ``zone``, expressed in UTC."""
    return datetime(year, month, day, hour, tzinfo=ZoneInfo(zone)).astimezone(UTC)


# (message, start offset, end offset) relative to local today; both dates inclusive.
# NOW is in January in every zone, so 上个月 (same day last month .. yesterday) is 31 days back.
RELATIVE_CASES: list[tuple[str, int, int]] = [
    ("今天我们聊了什么", 0, 0),
    ("今日聊了些什么？", 0, 0),
    ("今天早上我们聊了什么", 0, 0),
    ("what did we talk about today?", 0, 0),
    ("What did we chat about this morning", 0, 0),
    ("昨天我们聊了什么", -1, -1),
    ("昨日你说了什么", -1, -1),
    ("我昨天问过你一个问题", -1, -1),
    ("昨晚我们聊了啥", -1, -1),
    ("昨天聊的什么来着", -1, -1),
    ("昨天的聊天记录还在吗，我们说过什么", -1, -1),
    ("你还记得昨天我们说的吗", -1, -1),
    ("What did we discuss yesterday?", -1, -1),
    ("what did I say yesterday", -1, -1),
    ("YESTERDAY we chatted about something", -1, -1),
    ("last night we talked about movies", -1, -1),
    ("a day ago you mentioned a book", -1, -1),
    ("前天聊了什么", -2, -2),
    ("前天我提到过什么", -2, -2),
    ("what did we talk about the day before yesterday", -2, -2),
    ("Day before yesterday you said something", -2, -2),
    ("大前天我们聊了什么", -3, -3),
    ("大前天讨论过这个吗", -3, -3),
    ("3天前我们聊了什么", -3, -3),
    ("三天前聊的什么", -3, -3),
    ("两天前说过什么", -2, -2),
    ("十天前讨论了什么", -10, -10),
    ("5 天前我们聊过吗", -5, -5),
    ("一天以前谈了什么", -1, -1),
    ("what did we talk about two days ago", -2, -2),
    ("what did I mention 4 days ago?", -4, -4),
    ("Ten days ago we discussed pricing", -10, -10),
    ("上周我们聊了什么", -7, -1),
    ("上星期讨论了什么", -7, -1),
    ("上个星期谈了什么", -7, -1),
    ("上礼拜说过什么", -7, -1),
    ("what did we discuss last week?", -7, -1),
    ("上上周聊了什么", -14, -8),
    ("上个月我们聊过什么", -31, -1),
    ("上月说了什么", -31, -1),
    ("what did we talk about last month", -31, -1),
    ("最近两天聊了什么", -1, 0),  # the last N days: N days through today
    ("what have we talked about in the last 3 days", -2, 0),
    ("昨天和前天聊了什么", -2, -1),
    ("上週聊過什麼", -7, -1),
    ("昨天聊過什麼", -1, -1),
    ("過去三天我們聊過什麼", -2, 0),
]


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(("message", "start", "end"), RELATIVE_CASES)
def test_relative_phrases(message: str, start: int, end: int, zone: str) -> None:
    today = local_today(zone)
    found = detect(message, zone, NOW)
    assert found is not None, message
    assert (found.start, found.end) == (today + timedelta(days=start), today + timedelta(days=end))
    assert found.phrase
    assert found.phrase in message


def test_relative_case_table_is_large() -> None:
    assert len(RELATIVE_CASES) >= 40


# --- local midnight ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Asia/Shanghai", date(2026, 1, 8)),  # 00:30 on the 9th
        ("America/New_York", date(2026, 1, 7)),  # 11:30 on the 8th
        ("Asia/Kolkata", date(2026, 1, 7)),  # 22:00 on the 8th
        ("UTC", date(2026, 1, 7)),  # 16:30 on the 8th
    ],
)
def test_same_message_different_dates_around_midnight(zone: str, expected: date) -> None:
    found = detect("昨天我们聊了什么", zone, NOW)
    assert found == TimeRange(start=expected, end=expected, phrase="昨天")


def test_quarter_hour_zones_split_at_midnight() -> None:
    # 18:20Z is 23:50 on the 8th in Kolkata (+05:30) but 00:05 on the 9th in Kathmandu (+05:45).
    now = datetime(2026, 1, 8, 18, 20, tzinfo=UTC)
    kolkata = detect("what did we talk about today", "Asia/Kolkata", now)
    kathmandu = detect("what did we talk about today", "Asia/Kathmandu", now)
    assert kolkata is not None and kathmandu is not None
    assert kolkata.start == date(2026, 1, 8)
    assert kathmandu.start == date(2026, 1, 9)


def test_now_in_another_zone_is_converted() -> None:
    now = datetime(2026, 1, 9, 0, 30, tzinfo=ZoneInfo("Asia/Shanghai"))  # same instant as NOW
    found = detect("what did we discuss yesterday", "America/New_York", now)
    assert found is not None
    assert found.start == date(2026, 1, 7)


def test_invalid_zone_falls_back_to_utc() -> None:
    for zone in ["Not/AZone", "", "America"]:
        found = detect("yesterday we talked about it", zone, NOW)
        assert found is not None
        assert found.start == date(2026, 1, 7)


def test_naive_now_is_read_as_utc() -> None:
    found = detect("昨天聊了什么", "Asia/Shanghai", datetime(2026, 1, 8, 16, 30))
    assert found is not None
    assert found.start == date(2026, 1, 8)


# --- calendar-dependent phrases at fixed local dates ----------------------------------------

# 2026-01-05 is a Monday; 2026-01-08 a Thursday; 2026-01-11 a Sunday.
DATED_CASES: list[tuple[str, date, str, date, date]] = [
    # (message, local today, zone, start, end)
    ("这周聊了什么", date(2026, 1, 5), SHANGHAI, date(2026, 1, 5), date(2026, 1, 5)),
    ("这周聊了什么", date(2026, 1, 11), SHANGHAI, date(2026, 1, 5), date(2026, 1, 11)),
    ("本周讨论了什么", date(2026, 1, 8), "America/New_York", date(2026, 1, 5), date(2026, 1, 8)),
    ("what did we talk about this week", date(2026, 1, 11), "Asia/Kolkata", date(2026, 1, 5), date(2026, 1, 11)),
    ("what did we talk about this week", date(2026, 1, 5), "Asia/Kathmandu", date(2026, 1, 5), date(2026, 1, 5)),
    ("上个月聊了什么", date(2026, 3, 31), SHANGHAI, date(2026, 2, 28), date(2026, 3, 30)),
    ("what did we discuss last month", date(2028, 3, 31), "America/New_York", date(2028, 2, 29), date(2028, 3, 30)),
    ("上月说了什么", date(2026, 3, 1), SHANGHAI, date(2026, 2, 1), date(2026, 2, 28)),
    ("上个月聊了什么", date(2026, 1, 1), SHANGHAI, date(2025, 12, 1), date(2025, 12, 31)),
    ("这个月聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 1), date(2026, 1, 8)),
    ("1月7日聊了什么", date(2026, 1, 5), SHANGHAI, date(2025, 1, 7), date(2025, 1, 7)),
    ("1月7日聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 7), date(2026, 1, 7)),
    ("1月7号我们说过什么", date(2026, 1, 7), SHANGHAI, date(2026, 1, 7), date(2026, 1, 7)),
    ("一月七日讨论了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 7), date(2026, 1, 7)),
    ("2025年12月25日聊了什么", date(2026, 1, 8), SHANGHAI, date(2025, 12, 25), date(2025, 12, 25)),
    ("2月29日聊了什么", date(2026, 3, 1), SHANGHAI, date(2024, 2, 29), date(2024, 2, 29)),
    ("7号说了什么", date(2026, 1, 9), SHANGHAI, date(2026, 1, 7), date(2026, 1, 7)),
    ("7日聊了什么", date(2026, 1, 5), SHANGHAI, date(2025, 12, 7), date(2025, 12, 7)),
    ("31号聊了什么", date(2026, 3, 5), SHANGHAI, date(2026, 1, 31), date(2026, 1, 31)),
    ("十五号我们聊过吗", date(2026, 1, 20), SHANGHAI, date(2026, 1, 15), date(2026, 1, 15)),
    ("what did we discuss on the 7th", date(2026, 1, 8), "America/New_York", date(2026, 1, 7), date(2026, 1, 7)),
    ("What did we talk about on January 7?", date(2026, 1, 5), "America/New_York", date(2025, 1, 7), date(2025, 1, 7)),
    ("Jan 7th we discussed the plan", date(2026, 1, 8), "America/New_York", date(2026, 1, 7), date(2026, 1, 7)),
    ("we talked about it on 7 January", date(2026, 1, 8), "Asia/Kolkata", date(2026, 1, 7), date(2026, 1, 7)),
    ("what did I say on January 7, 2025", date(2026, 1, 8), "Asia/Kolkata", date(2025, 1, 7), date(2025, 1, 7)),
    ("2026-01-07 what did I say", date(2026, 1, 8), "Asia/Kathmandu", date(2026, 1, 7), date(2026, 1, 7)),
    ("12月份聊了什么", date(2026, 1, 8), SHANGHAI, date(2025, 12, 1), date(2025, 12, 31)),
    ("1月聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 1), date(2026, 1, 8)),
    ("what did we discuss in December", date(2026, 1, 8), "America/New_York", date(2025, 12, 1), date(2025, 12, 31)),
    ("周一聊了什么", date(2026, 1, 5), SHANGHAI, date(2026, 1, 5), date(2026, 1, 5)),
    ("周一聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 5), date(2026, 1, 5)),
    ("星期三说过什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 7), date(2026, 1, 7)),
    ("礼拜天讨论了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 4), date(2026, 1, 4)),
    ("周日聊了什么", date(2026, 1, 11), SHANGHAI, date(2026, 1, 11), date(2026, 1, 11)),
    ("周五聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 2), date(2026, 1, 2)),
    ("上周一聊了什么", date(2026, 1, 8), SHANGHAI, date(2025, 12, 29), date(2025, 12, 29)),
    ("上星期五说了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 2), date(2026, 1, 2)),
    ("这周二聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 6), date(2026, 1, 6)),
    ("what did we discuss on Monday", date(2026, 1, 8), "America/New_York", date(2026, 1, 5), date(2026, 1, 5)),
    ("monday we talked about taxes", date(2026, 1, 5), "America/New_York", date(2026, 1, 5), date(2026, 1, 5)),
    (
        "what did we talk about last Monday",
        date(2026, 1, 5),
        "America/New_York",
        date(2025, 12, 29),
        date(2025, 12, 29),
    ),
    ("Friday you mentioned a restaurant", date(2026, 1, 8), "Asia/Kolkata", date(2026, 1, 2), date(2026, 1, 2)),
    ("周末聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 3), date(2026, 1, 4)),
    ("周末聊了什么", date(2026, 1, 10), SHANGHAI, date(2026, 1, 10), date(2026, 1, 10)),
    ("上周末聊了什么", date(2026, 1, 11), SHANGHAI, date(2026, 1, 3), date(2026, 1, 4)),
    ("what did we discuss over the weekend", date(2026, 1, 5), "America/New_York", date(2026, 1, 3), date(2026, 1, 4)),
    ("周一到周三聊了什么", date(2026, 1, 8), SHANGHAI, date(2026, 1, 5), date(2026, 1, 7)),
]


@pytest.mark.parametrize(("message", "today", "zone", "start", "end"), DATED_CASES)
def test_dated_phrases(message: str, today: date, zone: str, start: date, end: date) -> None:
    now = at(zone, today.year, today.month, today.day)
    found = detect(message, zone, now)
    assert found is not None, message
    assert (found.start, found.end) == (start, end)


@pytest.mark.parametrize(
    ("message", "phrase"),
    [
        ("大前天我们聊了什么", "大前天"),
        ("前天我们聊了什么", "前天"),
        ("what did we talk about the day before yesterday", "the day before yesterday"),
        ("what did we talk about yesterday", "yesterday"),
        ("上周一聊了什么", "上周一"),
        ("周一到周三聊了什么", "周一到周三"),
        ("yesterday, and also 3 days ago, what did I mention", "yesterday, 3 days ago"),
        ("上週聊過什麼", "上週"),
    ],
)
def test_phrase_is_the_matched_time_words(message: str, phrase: str) -> None:
    found = detect(message, SHANGHAI, NOW)
    assert found is not None
    assert found.phrase == phrase


def test_longer_forms_win_over_their_suffixes() -> None:
    today = local_today(SHANGHAI)
    three = detect("大前天聊了什么", SHANGHAI, NOW)
    two = detect("what did we discuss the day before yesterday", SHANGHAI, NOW)
    assert three is not None and three.start == today - timedelta(days=3)
    assert two is not None and two.start == today - timedelta(days=2)


@pytest.mark.parametrize(
    "message",
    [
        "",
        "明天天气怎么样",
        "今天天气怎么样",
        "what's the weather today",
        "What is on my calendar tomorrow?",
        "昨天我去了公园",
        "yesterday was a long day",
        "今天聊什么好呢",
        "今天好无聊的",
        "2月30日聊了什么",
        "what did we talk about tomorrow",
        "we talk about Mondays a lot",
    ],
)
def test_no_detection(message: str) -> None:
    for zone in ZONES:
        assert detect(message, zone, NOW) is None


@pytest.mark.parametrize(
    "message",
    [
        "之前我们聊了什么",
        "我们之前讨论过这个吗",
        "以前我们聊过什么",
        "what did we talk about before",
        "what did we discuss earlier",
    ],
)
def test_before_with_no_day_named_is_the_last_seven_days_through_today(message: str) -> None:
    for zone in ZONES:
        today = local_today(zone)
        found = detect(message, zone, NOW)
        assert found is not None and not found.latest
        assert (found.start, found.end) == (today - timedelta(days=6), today)  # 7 days, today included


@pytest.mark.parametrize("message", ["上次说了什么", "上一次我们聊了什么？", "what did we discuss last time"])
def test_last_time_is_the_latest_day_with_records_before_today(message: str) -> None:
    for zone in ZONES:
        today = local_today(zone)
        found = detect(message, zone, NOW)
        assert found is not None and found.latest
        assert (found.start, found.end) == (today - timedelta(days=30), today - timedelta(days=1))


def test_a_named_day_wins_over_a_vague_one() -> None:
    found = detect("上次，就是昨天，我们聊了什么", SHANGHAI, NOW)
    assert found is not None and not found.latest and found.start == found.end == local_today(SHANGHAI) - timedelta(1)


@pytest.mark.parametrize("message", ["昨天我说的药具体叫什么？", "我提到的那家医院叫什么，上周", "上次我们聊的那本书"])
def test_what_i_said_is_a_question_about_the_conversation(message: str) -> None:
    assert detect(message, SHANGHAI, NOW) is not None


@pytest.mark.parametrize("message", ["你说的对", "他说的药很贵，昨天买了"])
def test_what_others_said_is_not(message: str) -> None:
    assert detect(message, SHANGHAI, NOW) is None


def test_parse_range_args_reads_vague_times_too() -> None:
    assert parse_range_args("上次", None, None, SHANGHAI, NOW).latest
    assert parse_range_args("before", None, None, SHANGHAI, NOW).end == local_today(SHANGHAI)


def test_time_range_is_frozen() -> None:
    found = detect("昨天聊了什么", SHANGHAI, NOW)
    assert found is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.start = date(2000, 1, 1)  # type: ignore[misc]


# --- is_detail_question -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("他具体说了什么？", True),
        ("我的原话是什么", True),
        ("那家餐厅叫什么", True),
        ("那个耳机多少钱来着", True),
        ("我们约的几点", True),
        ("What EXACTLY did I say?", True),
        ("what was the name of the hotel", True),
        ("How much was the ticket?", True),
        ("give me the exact wording", True),
        ("昨天我们聊了什么", False),
        ("what did we talk about yesterday", False),
        ("the inexact science", False),
        ("howmuch", False),
        ("", False),
    ],
)
def test_is_detail_question(message: str, expected: bool) -> None:
    assert is_detail_question(message) is expected


# --- parse_range_args -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("time_range", "start", "end"),
    [
        ("yesterday", -1, -1),
        ("昨天", -1, -1),
        ("上周", -7, -1),
        ("last week", -7, -1),
        ("3 days ago", -3, -3),
        ("三天前", -3, -3),
        ("today", 0, 0),
        ("这周", -4, 0),  # today is Friday 2026-01-09 in Shanghai
    ],
)
def test_parse_range_args_phrases(time_range: str, start: int, end: int) -> None:
    today = local_today(SHANGHAI)
    found = parse_range_args(time_range, None, None, SHANGHAI, NOW)
    assert (found.start, found.end) == (today + timedelta(days=start), today + timedelta(days=end))
    assert found.phrase == time_range


def test_parse_range_args_iso_dates() -> None:
    found = parse_range_args(None, "2026-01-01", "2026-01-07", SHANGHAI, NOW)
    assert found == TimeRange(start=date(2026, 1, 1), end=date(2026, 1, 7), phrase="2026-01-01..2026-01-07")


def test_parse_range_args_start_only_ends_today() -> None:
    found = parse_range_args(None, "2026-01-01", None, "America/New_York", NOW)
    assert (found.start, found.end) == (date(2026, 1, 1), date(2026, 1, 8))
    found = parse_range_args("  ", "2026-01-01", "", SHANGHAI, NOW)
    assert (found.start, found.end) == (date(2026, 1, 1), date(2026, 1, 9))


def test_parse_range_args_datetime_is_converted_to_zone() -> None:
    found = parse_range_args(None, "2026-01-07T23:30:00+00:00", "2026-01-08", SHANGHAI, NOW)
    assert found.start == date(2026, 1, 8)


@pytest.mark.parametrize(
    ("time_range", "start", "end", "message"),
    [
        (None, None, None, "give time_range"),
        ("", "", "", "give time_range"),
        ("sometime", None, None, "could not understand time_range 'sometime'"),
        ("某个时候", None, None, "could not understand"),
        ("yesterday", "2026-01-01", None, "not both"),
        (None, None, "2026-01-07", "end was given without start"),
        (None, "01/07/2026", None, "start must be an ISO date"),
        (None, "2026-01-01", "next friday", "end must be an ISO date"),
        (None, "2026-01-07", "2026-01-01", "start 2026-01-07 is after end 2026-01-01"),
        (None, "2027-01-01", None, "is after today"),
    ],
)
def test_parse_range_args_errors(time_range: str | None, start: str | None, end: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_range_args(time_range, start, end, SHANGHAI, NOW)
