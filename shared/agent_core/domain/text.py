"""Sizes of client text: UTF-8 bytes, as the limits (AGENT_MAX_MESSAGE_BYTES...) count them."""

from __future__ import annotations

from agent_core.errors import InvalidRequest


def utf8_size(text: str, param: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (`"\\ud800"` in JSON) is not text: 4xx `invalid_text`."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"{param} is not valid Unicode text", param=param, code="invalid_text") from exc
