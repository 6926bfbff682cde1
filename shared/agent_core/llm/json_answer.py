"""Finding the JSON object in a model's answer (fenced or not, trailing prose ignored)."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class NoJsonObject(ValueError):
    """The answer holds no JSON object."""


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: inside a ``` fence if there is one, trailing prose ignored."""
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    raise NoJsonObject("no JSON object found in the answer")
