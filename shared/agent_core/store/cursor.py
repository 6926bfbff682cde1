"""Opaque pagination cursors: the table's last evaluated key, urlsafe-base64 JSON."""

from __future__ import annotations

import base64
import binascii
import json

from agent_core.errors import InvalidRequest
from agent_core.store.table import Item


def encode_cursor(last_key: Item | None) -> str | None:
    if not last_key:
        return None
    raw = json.dumps(last_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Item | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error) as exc:
        raise InvalidRequest("cursor is not valid", param="cursor") from exc
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidRequest("cursor is not valid", param="cursor")
    return value
