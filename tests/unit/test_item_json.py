"""The embedded store's item JSON: the text json.dumps writes, the values json.loads reads, many rows in one call."""

from __future__ import annotations

import json

import pytest

from agent_core.store import item_json

ITEMS = [
    {"pk": "CHAT#c", "sk": "MSG#1", "content": '你好 "quoted" \\ \n\t\x00\U0010ffff', "n": 3, "f": 0.1, "big": 10**30},
    {"pk": "p", "sk": "s", "l": [[[[]]]], "m": {"": {}, "x": []}, "b": [True, False, None], "e": ""},
    {"pk": "p", "sk": "s", "f": [1e-05, -2.5e300, 7.0, float("inf"), float("-inf")]},
    {},
]


@pytest.mark.parametrize("item", ITEMS)
def test_encode_writes_what_json_dumps_writes_and_decode_reads_it_back(item: dict[str, object]) -> None:
    text = item_json.encode(item)
    assert text == json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    assert item_json.decode(text) == json.loads(text)


def test_many_rows_decode_as_one_array_in_order() -> None:
    texts = [item_json.encode(item) for item in ITEMS]
    assert item_json.decode_all(texts) == [json.loads(t) for t in texts]
    assert item_json.decode_all(texts[:1]) == [ITEMS[0]] and item_json.decode_all([]) == []


def test_encode_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        item_json.encode({"pk": "p", "s": {1}})


@pytest.mark.parametrize("text", ['{"a":1}x', '{"a":1}{"b":2}', '{"a" 1}', "", "[1]", ' {"a":1}'])
def test_text_it_did_not_write_is_read_by_json_loads(text: str) -> None:
    """Trailing data, two values, broken JSON, or anything not one object: json.loads's answer (its error or
    its value), never half an item."""
    try:
        expected: object = json.loads(text)
    except json.JSONDecodeError as error:
        with pytest.raises(json.JSONDecodeError) as raised:
            item_json.decode(text)
        assert str(raised.value) == str(error)
        with pytest.raises(json.JSONDecodeError):
            item_json.decode_all(['{"ok":1}', text])
    else:
        assert item_json.decode(text) == expected
        assert item_json.decode_all(['{"ok":1}', text]) == [{"ok": 1}, expected]


def test_rows_that_would_split_or_merge_the_array_are_each_read_alone() -> None:
    """`1,2` would add an element to the joined array, `]` would end it early: each row is then read alone."""
    with pytest.raises(json.JSONDecodeError):
        item_json.decode_all(['{"a":1}', '{"b":2},{"c":3}'])
    with pytest.raises(json.JSONDecodeError):
        item_json.decode_all(['{"a":1}]', '[{"b":2}'])
