"""The size DynamoDB counts against its 400 KB item limit: attribute names plus values, strings in UTF-8.

Rules as DynamoDB documents them: a string is its UTF-8 length, a number about one byte per two
significant digits plus one, binary its length, a boolean or null one byte, a list or map 3 bytes plus
one per element plus its contents (a map's keys count like attribute names).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

ITEM_LIMIT_BYTES = 400 * 1024


def _number_size(value: int | float | Decimal) -> int:
    digits = str(abs(Decimal(value)).normalize()).replace(".", "").lstrip("0")
    digits = digits.split("E")[0] if "E" in digits else digits
    return (len(digits.rstrip("0") or "0") + 1) // 2 + 1


def value_size(value: Any) -> int:
    """Bytes one attribute value takes."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, int | float | Decimal):
        return _number_size(value)
    if isinstance(value, dict):
        return 3 + sum(1 + len(str(k).encode("utf-8")) + value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 3 + sum(1 + value_size(v) for v in value)
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")


def item_size(item: dict[str, Any]) -> int:
    """Bytes the whole item takes (None values are not written, so they count nothing)."""
    return sum(len(name.encode("utf-8")) + value_size(v) for name, v in item.items() if v is not None)
