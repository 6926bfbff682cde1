"""Secrets Manager values through Powertools Parameters (cached): the LLM key, the data-token key."""

from __future__ import annotations

import json
from typing import Any

MAX_AGE_S = 300


class SecretFormatError(ValueError):
    """A secret holds a JSON object without any of the expected keys (the message names keys, never values)."""


def _json_object(text: str) -> dict[str, Any] | None:
    """`text` as a JSON object, or None when it is not one (a plain value that merely starts with `{`)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None  # never chain or log the decode error: it carries the secret's text
    return value if isinstance(value, dict) else None


def secret_value(name: str, raw: str | bytes, keys: tuple[str, ...] = ()) -> str:
    """The usable value of secret `name`: the first of `keys` in a JSON object, else the plain (trimmed) text."""
    text = (raw.decode() if isinstance(raw, bytes) else raw).strip()
    if not text:
        raise SecretFormatError(f"secret {name!r} is empty")
    document = _json_object(text) if keys and text.startswith("{") else None
    if document is None:
        return text
    for key in keys:
        value = document.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    found = ", ".join(sorted(str(k) for k in document)[:10]) or "none"
    expected = ", ".join(keys)
    raise SecretFormatError(
        f"secret {name!r} is a JSON object without a usable key (expected one of: {expected}; found: {found}); "
        "store the plain value, or a JSON object with one of the expected keys"
    )


def read_secret(name: str, keys: tuple[str, ...] = ()) -> str:
    """A secret's value: the plain string, or the first of `keys` found in a JSON object (see `secret_value`)."""
    from aws_lambda_powertools.utilities.parameters import get_secret

    raw: Any = get_secret(name, max_age=MAX_AGE_S)
    if not isinstance(raw, str | bytes):
        raise SecretFormatError(f"secret {name!r} holds no usable value")
    return secret_value(name, raw, keys)
