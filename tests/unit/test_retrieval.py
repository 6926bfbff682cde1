"""Hybrid retrieval over one user's records (memory/retrieval.py): fusion, the relevance floor, the time filter,
the token budget and overlapping windows; and the message windows records are cut into."""

from __future__ import annotations

from agent_core.domain.models import Message, Role
from agent_core.llm.tokens import estimate_text
from agent_core.memory.embedding import hash_vector
from agent_core.memory.records import MemoryRecord, RecordKind, message_records
from agent_core.memory.retrieval import SearchQuery, UserIndex, search

DIMS = 1024


def _record(rid: str, text: str, at: int, ids: list[str] | None = None) -> MemoryRecord:
    return MemoryRecord(
        record_id=rid, user_id="u", kind=RecordKind.MESSAGE, text=text, chat_id="c", message_ids=ids or [rid], at=at
    )


RECORDS = [
    _record("greet", "user: Welcome back! Nice to see you again today.\nassistant: Nice to see you too!", 1_000),
    _record("trip", "user: We fly to El Calafate in November to hike the Fitz Roy trail.", 2_000),
    _record("piano", "user: My piano teacher Mr Okafor gave me a Chopin nocturne.", 3_000),
    _record("typo", "user: the nocturnes of chopinn are hard on the left hand", 4_000),
]
INDEX = UserIndex.build(RECORDS, [hash_vector(r.text, DIMS) for r in RECORDS], DIMS)


def _ids(query: SearchQuery) -> list[str]:
    hits, _ = search(INDEX, query, hash_vector(query.text, DIMS))
    return [h.record.record_id for h in hits]


def test_small_talk_passes_no_floor_but_is_found_without_one() -> None:
    greeting = "Welcome back, nice to see you again!"
    assert "greet" in _ids(SearchQuery(greeting))
    assert _ids(SearchQuery(greeting, min_similarity=0.2)) == []
    assert _ids(SearchQuery("Which trail do we hike near El Calafate?", min_similarity=0.2)) == ["trip"]


def test_lexical_and_vector_rankings_are_fused() -> None:
    found = _ids(SearchQuery("Chopin nocturnes"))
    # "piano" shares the words; "typo" only spellings close to them (the vector ranking finds it).
    assert found[:2] == ["piano", "typo"] or found[:2] == ["typo", "piano"]
    assert "trip" not in found


def test_the_time_range_is_start_inclusive_and_end_exclusive() -> None:
    assert _ids(SearchQuery("Chopin nocturne piano", start=3_000, end=4_000)) == ["piano"]
    assert _ids(SearchQuery("Chopin nocturne piano", start=3_001)) == ["typo"]


def test_records_stop_before_the_budget_is_exceeded() -> None:
    everything, _ = search(INDEX, SearchQuery("Chopin nocturnes piano"), hash_vector("Chopin nocturnes piano", DIMS))
    assert len(everything) >= 2
    first = estimate_text(everything[0].record.text)
    hits, tokens = search(
        INDEX, SearchQuery("Chopin nocturnes piano", max_tokens=first + 1), hash_vector("Chopin nocturnes piano", DIMS)
    )
    assert [h.record.record_id for h in hits] == [everything[0].record.record_id] and tokens == first


def test_a_window_whose_messages_are_all_cited_already_is_skipped() -> None:
    records = [
        _record("a", "user: kayak trip on the fjord", 1, ["m1", "m2", "m3"]),
        _record("b", "user: the fjord", 2, ["m2", "m3"]),
        _record("c", "user: kayak rental", 3, ["m3", "m4"]),
    ]
    index = UserIndex.build(records, [hash_vector(r.text, DIMS) for r in records], DIMS)
    hits, _ = search(index, SearchQuery("kayak fjord trip"), hash_vector("kayak fjord trip", DIMS))
    assert [h.record.record_id for h in hits] == ["a", "c"]


def _messages(n: int) -> list[Message]:
    roles = [Role.USER, Role.ASSISTANT]
    return [
        Message(id=f"m{i:02d}", chat_id="c", role=roles[i % 2], content=f"text {i}", created_at=1000 + i)
        for i in range(n)
    ]


def test_windows_of_four_every_second_message_cover_every_message() -> None:
    for n in (1, 2, 3, 4, 5, 7, 10):
        windows = message_records("u", "c", _messages(n))
        assert all(1 <= len(w.message_ids) <= 4 for w in windows)
        assert {m for w in windows for m in w.message_ids} == {f"m{i:02d}" for i in range(n)}, n
        assert len({w.record_id for w in windows}) == len(windows)
    seven = [w.message_ids for w in message_records("u", "c", _messages(7))]
    assert seven == [["m00", "m01", "m02", "m03"], ["m02", "m03", "m04", "m05"], ["m03", "m04", "m05", "m06"]]
