"""Data links are signed when read, so two reads of one chat carry different tokens: compare what they say."""

from __future__ import annotations

import re

# The `t=` query parameter of a data link, up to the end of the URL (in text, JSON or a JSON string in JSON).
_TOKEN = re.compile(r"([?&]t=)[^\\\"'&\s)\]]+")


def unsigned(text: str) -> str:
    """`text` with every data link's read token replaced by `<token>`."""
    return _TOKEN.sub(r"\1<token>", text)
