"""Data tokens: HMAC-signed, expiring read grants for one data file, so `<img src>` links work."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from typing import Any

READ_SCOPE = "ap_data:read"
MAX_TOKEN_CHARS = 2048
TOKEN_INVALID = "TOKEN_INVALID"
TOKEN_EXPIRED = "TOKEN_EXPIRED"
TOKEN_SCOPE_MISMATCH = "TOKEN_SCOPE_MISMATCH"
TOKEN_FILE_MISMATCH = "TOKEN_FILE_MISMATCH"
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


class DataTokenError(Exception):
    """A refused data token; `error_code` is one of the TOKEN_* constants."""

    def __init__(self, error_code: str, message: str = "") -> None:
        super().__init__(message or error_code)
        self.error_code = error_code


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(secret: str, body: str) -> str:
    return _b64encode(hmac.new(secret.encode("utf-8"), body.encode("ascii"), hashlib.sha256).digest())


def sign_data_token(secret: str, chat_id: str, file: str, ttl_s: int, now: float, scope: str = READ_SCOPE) -> str:
    """A token granting `scope` on `file` (the full `{chatId}/{name}`) until `now + ttl_s` (epoch seconds)."""
    if not secret:
        raise ValueError("a data token needs a non-empty secret")
    if not file.startswith(f"{chat_id}/"):
        raise ValueError("file must be the full {chatId}/{name} of the chat")
    claims = {"scope": scope, "chatId": chat_id, "file": file, "exp": int(now) + int(ttl_s)}
    body = _b64encode(json.dumps(claims, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return f"{body}.{_signature(secret, body)}"


def _verified_claims(secret: str, token: str) -> dict[str, Any]:
    """The claims of a well-formed token with a valid signature, else TOKEN_INVALID."""
    body, sep, signature = token.partition(".")
    if not secret or len(token) > MAX_TOKEN_CHARS or not sep:
        raise DataTokenError(TOKEN_INVALID, "malformed token")
    if not _B64URL.fullmatch(body) or not _B64URL.fullmatch(signature):
        raise DataTokenError(TOKEN_INVALID, "malformed token")
    if not hmac.compare_digest(_signature(secret, body).encode("ascii"), signature.encode("ascii")):
        raise DataTokenError(TOKEN_INVALID, "bad signature")
    try:
        claims = json.loads(_b64decode(body))
    except (ValueError, binascii.Error) as exc:
        raise DataTokenError(TOKEN_INVALID, "unreadable claims") from exc
    if not isinstance(claims, dict):
        raise DataTokenError(TOKEN_INVALID, "unreadable claims")
    exp = claims.get("exp")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise DataTokenError(TOKEN_INVALID, "claims lack an expiry")
    return claims


def verify_data_token(secret: str, token: str, chat_id: str, file: str, now: float) -> None:
    """Accept a token for reading `file` of `chat_id`, or raise DataTokenError (signature, expiry, scope, file)."""
    claims = _verified_claims(secret, token)
    if now >= claims["exp"]:
        raise DataTokenError(TOKEN_EXPIRED, "token expired")
    if claims.get("scope") != READ_SCOPE:
        raise DataTokenError(TOKEN_SCOPE_MISMATCH, "token does not grant data reads")
    if claims.get("chatId") != chat_id or claims.get("file") != file:
        raise DataTokenError(TOKEN_FILE_MISMATCH, "token is for another file")
