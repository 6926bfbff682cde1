"""Data file paths: `{chatId}/{name}` or `{chatId}/{dir}/{name}`, refused unless plainly safe."""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote

from agent_core.errors import AgentError

MAX_PATH_CHARS = 512
MAX_SEGMENT_CHARS = 128
MAX_DECODE_ROUNDS = 4
KEY_PREFIX = "data"
_SAFE_PUNCT = frozenset("._-")
_ASCII_ID = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class InvalidPath(AgentError):
    """A data file path that is malformed or tries to leave its chat (400 invalid_path)."""

    code = "invalid_path"
    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = "file") -> None:
        super().__init__(message, param=param)


def _fully_decoded(raw: str) -> str:
    """Percent-decode until stable, so %2e%2e and %252e%252e are seen as what they mean."""
    value = raw
    for _ in range(MAX_DECODE_ROUNDS):
        try:
            decoded = unquote(value, errors="strict")
        except UnicodeDecodeError as exc:
            raise InvalidPath("path has percent-encoded bytes that are not UTF-8") from exc
        if decoded == value:
            return value
        value = decoded
    raise InvalidPath("path is percent-encoded too many times")


def _check_meaning(decoded: str) -> None:
    """Refuse what would be dangerous once decoded: controls, backslashes, absolute, `..`, empty segments."""
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in decoded):
        raise InvalidPath("path contains control characters")
    if "\\" in decoded:
        raise InvalidPath("path contains a backslash")
    if decoded.startswith("/"):
        raise InvalidPath("path must be relative: {chatId}/{name}")
    segments = decoded.split("/")
    if any(s in (".", "..") for s in segments):
        raise InvalidPath("path contains a '.' or '..' segment")
    if any(not s for s in segments):
        raise InvalidPath("path contains an empty segment")


def _check_segment(segment: str, what: str) -> None:
    """One name segment: letters, digits, `._-`, not starting with a dot, bounded length."""
    if not segment or len(segment) > MAX_SEGMENT_CHARS:
        raise InvalidPath(f"{what} must be 1..{MAX_SEGMENT_CHARS} characters")
    if segment.startswith("."):
        raise InvalidPath(f"{what} must not start with '.'")
    if not all(c.isalnum() or c in _SAFE_PUNCT for c in segment):
        raise InvalidPath(f"{what} may contain only letters, digits, '.', '_' and '-'")


def check_chat_id(chat_id: str) -> str:
    """A chat id as a path segment: ASCII letters, digits, `_` and `-` only."""
    if not chat_id or len(chat_id) > MAX_SEGMENT_CHARS or not set(chat_id) <= _ASCII_ID:
        raise InvalidPath("chat id segment is invalid")
    return chat_id


def normalize_data_name(raw: str) -> str:
    """A file name inside a chat (`name` or `dir/name`), or InvalidPath."""
    if not raw or len(raw) > MAX_PATH_CHARS:
        raise InvalidPath(f"name must be 1..{MAX_PATH_CHARS} characters")
    decoded = _fully_decoded(raw)
    _check_meaning(decoded)
    if decoded != raw:
        raise InvalidPath("name must not be percent-encoded")
    segments = raw.split("/")
    if len(segments) > 2:
        raise InvalidPath("name may have at most one directory: {dir}/{name}")
    for segment in segments:
        _check_segment(segment, "each name segment")
    return raw


def normalize_data_path(raw: str) -> tuple[str, str]:
    """`{chatId}/{name}` (or `{chatId}/{dir}/{name}`) split into (chat id, name), or InvalidPath."""
    if not raw or len(raw) > MAX_PATH_CHARS:
        raise InvalidPath("file must be {chatId}/{name}")
    _check_meaning(_fully_decoded(raw))
    chat_id, sep, name = raw.partition("/")
    if not sep:
        raise InvalidPath("file must be {chatId}/{name}")
    return check_chat_id(chat_id), normalize_data_name(name)


def data_file(chat_id: str, name: str) -> str:
    """The public file id `{chatId}/{name}` links and tokens carry."""
    return f"{chat_id}/{name}"


def data_key(chat_id: str, name: str) -> str:
    """The object key of a data file: `data/{chatId}/{name}`."""
    return f"{KEY_PREFIX}/{chat_id}/{name}"


def chat_data_prefix(chat_id: str) -> str:
    """The key prefix holding every data file of one chat (for deletion with the chat)."""
    return f"{KEY_PREFIX}/{check_chat_id(chat_id)}/"
