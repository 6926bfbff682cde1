"""Pagination cursors as a table: the last evaluated key round-trips; anything else a client sends is refused."""

from __future__ import annotations

import base64

import pytest

from agent_core.errors import InvalidRequest
from agent_core.store.cursor import decode_cursor, encode_cursor

KEYS: list[tuple[str, dict[str, str]]] = [
    ("message key", {"pk": "CHAT#c1", "sk": "MSG#01J0000000000000000000000"}),
    ("index key", {"pk": "USER#u1", "sk": "META", "gsi1pk": "USER#u1", "gsi1sk": "000001700000000#c1"}),
    ("unicode and padding", {"pk": "USER#用户", "sk": "x"}),
    ("url-unsafe base64 bytes", {"pk": "???>>>", "sk": "~~~"}),
]


@pytest.mark.parametrize("key", [k for _, k in KEYS], ids=[n for n, _ in KEYS])
def test_a_key_round_trips(key: dict[str, str]) -> None:
    cursor = encode_cursor(key)
    assert cursor is not None
    assert "=" not in cursor and "+" not in cursor and "/" not in cursor  # safe in a query string as is
    assert decode_cursor(cursor) == key


def test_the_cursor_does_not_depend_on_key_order() -> None:
    assert encode_cursor({"pk": "a", "sk": "b"}) == encode_cursor({"sk": "b", "pk": "a"})


@pytest.mark.parametrize("last_key", [None, {}], ids=["none", "empty"])
def test_no_last_key_is_no_cursor(last_key: dict[str, str] | None) -> None:
    assert encode_cursor(last_key) is None


@pytest.mark.parametrize("cursor", [None, ""], ids=["none", "empty"])
def test_no_cursor_is_the_first_page(cursor: str | None) -> None:
    assert decode_cursor(cursor) is None


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


BAD: list[tuple[str, str]] = [
    ("not base64", "%%%"),
    ("base64 of prose", b64(b"hello")),
    ("a JSON list", b64(b'["pk"]')),
    ("a JSON string", b64(b'"pk"')),
    ("a number value", b64(b'{"pk":"a","n":1}')),
    ("a nested value", b64(b'{"pk":{"S":"a"}}')),
    ("invalid utf-8", b64(b"\xff\xfe{")),
]


@pytest.mark.parametrize("cursor", [c for _, c in BAD], ids=[n for n, _ in BAD])
def test_a_bad_cursor_is_a_clear_error(cursor: str) -> None:
    with pytest.raises(InvalidRequest) as error:
        decode_cursor(cursor)
    assert error.value.param == "cursor"
