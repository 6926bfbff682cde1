"""Client text: its size in UTF-8 bytes, as the limits (AGENT_MAX_MESSAGE_BYTES...) count them, and its script."""

from __future__ import annotations

import re

from agent_core.errors import InvalidRequest

CJK_IDEOGRAPHS = "\u3400-\u9fff"  # a regular-expression class body: CJK Extension A and Unified Ideographs
_CJK = re.compile(f"[{CJK_IDEOGRAPHS}]")


def has_cjk(text: str) -> bool:
    """Whether the text holds a Chinese (CJK) ideograph: the runtime then writes its fixed replies in Chinese."""
    return _CJK.search(text) is not None


def utf8_size(text: str, param: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (`"\\ud800"` in JSON) is not text: 4xx `invalid_text`."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"{param} is not valid Unicode text", param=param, code="invalid_text") from exc
