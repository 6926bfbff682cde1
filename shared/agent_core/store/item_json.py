"""Items as the embedded store keeps them: compact JSON, written and read through the json module's C encoder and
scanner directly.

`json.dumps` / `JSONEncoder.encode` build a new C encoder on every call and `json.loads` runs two regular
expressions and three Python calls around the C scanner: about 1 us an item either way, more than the parsing
of a small item itself, and a turn reads and writes dozens. The same text comes out and the same values come
back (the encoder's options are `JSONEncoder(ensure_ascii=False, separators=(",", ":"))`'s; `decode` checks
that the scanner read the whole text, and leaves anything else to `json.loads`, which raises as usual). Many
rows are read as one JSON array, one scanner call for all of them.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from json.scanner import make_scanner
from typing import Any

Item = dict[str, Any]


def _unencodable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# markers=None: no check for circular references (an item is a tree of plain values); allow_nan as json's default.
_encoder = c_make_encoder(None, _unencodable, encode_basestring, None, ":", ",", False, False, True)
_scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: the C scanner takes a decoder


def encode(item: Item) -> str:
    """The item's compact JSON (what `json.dumps(item, ensure_ascii=False, separators=(",", ":"))` gives)."""
    return "".join(_encoder(item, 0))


def decode(data: str) -> Item:
    """The item stored as `data` (JSON this module wrote)."""
    try:
        value, end = _scan(data, 0)
    except (StopIteration, ValueError):
        value, end = None, -1
    if end != len(data) or not isinstance(value, dict):
        value = json.loads(data)  # not what `encode` writes: json's own errors and values
    item: Item = value
    return item


def decode_all(data: list[str]) -> list[Item]:
    """The items stored as `data`, in order: one JSON array of them, read by one scanner call."""
    if len(data) < 2:
        return [decode(d) for d in data]
    joined = "[" + ",".join(data) + "]"
    try:
        items, end = _scan(joined, 0)
    except (StopIteration, ValueError):
        items, end = None, -1
    if end != len(joined) or len(items) != len(data) or not all(isinstance(i, dict) for i in items):
        return [decode(d) for d in data]  # one of them is not one JSON value: read each on its own
    return items
