"""Token estimates without tiktoken (its encodings cannot be fetched here)."""

from __future__ import annotations

import json
from typing import Any

# CJK characters are roughly one token each; other text roughly four characters per token.
_CHARS_PER_TOKEN = 4.0
_MESSAGE_OVERHEAD = 4


def estimate_text(text: str) -> int:
    if not text:
        return 0
    wide = sum(1 for ch in text if ord(ch) > 0x2E7F)
    narrow = len(text) - wide
    return wide + int(narrow / _CHARS_PER_TOKEN + 0.999)


def estimate_message(message: dict[str, Any]) -> int:
    tokens = _MESSAGE_OVERHEAD + estimate_text(str(message.get("content") or ""))
    for call in message.get("tool_calls") or []:
        tokens += estimate_text(json.dumps(call, ensure_ascii=False))
    return tokens


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_message(m) for m in messages)
