"""Content-Disposition header values safe for any file name (RFC 6266 / RFC 5987)."""

from __future__ import annotations

from urllib.parse import quote

_UNSAFE_ASCII = frozenset('"\\;')


def content_disposition(filename: str, *, attachment: bool) -> str:
    """`inline` or `attachment` with an ASCII `filename` fallback and a UTF-8 `filename*`."""
    kind = "attachment" if attachment else "inline"
    fallback = "".join(c if 0x20 <= ord(c) < 0x7F and c not in _UNSAFE_ASCII else "_" for c in filename)
    value = f'{kind}; filename="{fallback}"'
    if fallback != filename:
        value += f"; filename*=UTF-8''{quote(filename, safe='')}"
    return value
