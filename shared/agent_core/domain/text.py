"""Client text: its size in UTF-8 bytes, as the limits (AGENT_MAX_MESSAGE_BYTES...) count them, its script, a
message's validity and the chat name made of it."""

from __future__ import annotations

import re

from agent_core.errors import InvalidRequest, PayloadTooLarge

CJK_IDEOGRAPHS = "\u3400-\u9fff"  # a regular-expression class body: CJK Extension A and Unified Ideographs
_CJK = re.compile(f"[{CJK_IDEOGRAPHS}]")
CHAT_NAME_CHARS = 30


def has_cjk(text: str) -> bool:
    """Whether the text holds a Chinese (CJK) ideograph: the runtime then writes its fixed replies in Chinese."""
    return _CJK.search(text) is not None


def utf8_size(text: str, param: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (`"\\ud800"` in JSON) is not text: 4xx `invalid_text`."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"{param} is not valid Unicode text", param=param, code="invalid_text") from exc


def validate_message(message: str, max_bytes: int) -> str:
    if not message or not message.strip():
        raise InvalidRequest("message must not be blank", param="message", code="blank_message")
    if utf8_size(message, "message") > max_bytes:
        raise PayloadTooLarge(f"message exceeds {max_bytes} bytes (UTF-8)", param="message")
    return message


def chat_name(message: str) -> str:
    """The first 30 code points of the trimmed message."""
    return message.strip()[:CHAT_NAME_CHARS]
