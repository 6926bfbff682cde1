"""Secrets Manager values through Powertools Parameters (cached): the LLM key, the data-token key."""

from __future__ import annotations

import json
from typing import Any

MAX_AGE_S = 300


def read_secret(name: str, keys: tuple[str, ...] = ()) -> str:
    """A secret's value: the plain string, or the first of `keys` found in a JSON object."""
    from aws_lambda_powertools.utilities.parameters import get_secret

    value: Any = get_secret(name, max_age=MAX_AGE_S)
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            return text
        value = json.loads(text)
    if isinstance(value, dict):
        for key in keys:
            if isinstance(value.get(key), str):
                return str(value[key]).strip()
    raise ValueError(f"secret {name!r} holds no usable value")
