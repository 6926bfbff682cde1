"""Data-file links: signed when an answer is written AND again whenever stored parts are read back.

A stored link's token expires (an hour), but the stored part keeps its file reference (`{chatId}/{name}`, in the
link itself and in save_file's `file`): every route returning stored parts (replay, message listings, a retried
request's stored result) passes them through `DataLinks.refresh`, which re-signs each link to a file of the chat
being read, so a reopened chat's links work whenever it is reopened."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlencode

from agent_core.config import Settings
from agent_core.tools.data_token import sign_data_token, verify_data_token

LINK_TTL_S = 3600
DATA_ROUTE = "/api/ap/data"
# A data link in any text: JSON results, tool messages stored as JSON text, Markdown answers.
_LINK = re.compile(re.escape(DATA_ROUTE) + r"\?file=(?P<file>[A-Za-z0-9_%./-]+)&t=(?P<token>[A-Za-z0-9_.-]+)")
T = TypeVar("T")


def data_link(file: str, token: str, base_url: str = "") -> str:
    """The URL serving `file` with its read token: under `base_url` (the API's public address), else root-relative."""
    return f"{base_url}{DATA_ROUTE}?{urlencode({'file': file, 't': token}, quote_via=quote, safe='/')}"


class DataLinks:
    """Signs and checks data links with the configured key, on one clock (the wall clock; tests inject theirs:
    X-Agent-Now never reaches link expiry)."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time, ttl_s: int = LINK_TTL_S) -> None:
        self._settings = settings
        self.clock = clock
        self.ttl_s = ttl_s

    def token(self, chat_id: str, file: str) -> str:
        return sign_data_token(self._settings.data_token_key(), chat_id, file, self.ttl_s, self.clock())

    def link(self, chat_id: str, file: str, base_url: str = "") -> str:
        """A fresh link to `file` (`{chatId}/{name}`) of `chat_id`."""
        return data_link(file, self.token(chat_id, file), base_url)

    def verify(self, token: str, chat_id: str, file: str) -> None:
        """Accept `token` for reading `file`, or raise DataTokenError."""
        verify_data_token(self._settings.data_token_key(), token, chat_id, file, self.clock())

    def refresh(self, value: T, chat_id: str) -> T:
        """`value` (JSON-like: dicts, lists, strings) with every link to a file of `chat_id` signed afresh.

        Links to another chat's files are left as they are: reading a chat grants links to its own files only."""
        refreshed: T = self._refresh(value, chat_id)
        return refreshed

    def _refresh(self, value: Any, chat_id: str) -> Any:
        if isinstance(value, str):
            return self._refresh_text(value, chat_id) if DATA_ROUTE in value else value
        if isinstance(value, dict):
            return {k: self._refresh(v, chat_id) for k, v in value.items()}
        if isinstance(value, list):
            return [self._refresh(v, chat_id) for v in value]
        return value

    def _refresh_text(self, text: str, chat_id: str) -> str:
        def fresh(match: re.Match[str]) -> str:
            file = unquote(match.group("file"))
            if file.partition("/")[0] != chat_id or not file.partition("/")[2]:
                return match.group(0)
            encoded = urlencode({"file": file, "t": self.token(chat_id, file)}, quote_via=quote, safe="/")
            return f"{DATA_ROUTE}?{encoded}"

        return _LINK.sub(fresh, text)
