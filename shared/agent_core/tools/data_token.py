"""Data tokens: expiring read grants for one data file (HS256 JWTs), so `<img src>` links work.

A token is a compact JWT (`{"alg":"HS256"}` header, no `typ`) whose claims are `scope`, `file` (the full
`{chatId}/{name}`, which names the chat) and `exp`. PyJWT checks the form (canonical base64url only, so a token
has one spelling: PyJWT >= 2.14) and the signature (in constant time); the expiry is checked here against the
caller's clock (PyJWT reads only the wall clock), then the scope, then the file. PyJWT is imported on first use:
it loads `cryptography`, which no cold start should pay for."""

from __future__ import annotations

from typing import Any

READ_SCOPE = "ap_data:read"
ALGORITHM = "HS256"
MAX_TOKEN_CHARS = 2048
TOKEN_INVALID = "TOKEN_INVALID"
TOKEN_EXPIRED = "TOKEN_EXPIRED"
TOKEN_SCOPE_MISMATCH = "TOKEN_SCOPE_MISMATCH"
TOKEN_FILE_MISMATCH = "TOKEN_FILE_MISMATCH"


class DataTokenError(Exception):
    """A refused data token; `error_code` is one of the TOKEN_* constants."""

    def __init__(self, error_code: str, message: str = "") -> None:
        super().__init__(message or error_code)
        self.error_code = error_code


def sign_data_token(secret: str, chat_id: str, file: str, ttl_s: int, now: float, scope: str = READ_SCOPE) -> str:
    """A token granting `scope` on `file` (the full `{chatId}/{name}`) until `now + ttl_s` (epoch seconds)."""
    import jwt

    if not secret:
        raise ValueError("a data token needs a non-empty secret")
    if not file.startswith(f"{chat_id}/"):
        raise ValueError("file must be the full {chatId}/{name} of the chat")
    claims = {"scope": scope, "file": file, "exp": int(now) + int(ttl_s)}
    return jwt.encode(claims, secret, algorithm=ALGORITHM, headers={"typ": None})


def _verified_claims(secret: str, token: str) -> dict[str, Any]:
    """The claims of a well-formed HS256 token with a valid signature and an integer expiry, else TOKEN_INVALID."""
    import jwt

    if not secret or len(token) > MAX_TOKEN_CHARS:
        raise DataTokenError(TOKEN_INVALID, "malformed token")
    try:
        claims: dict[str, Any] = jwt.decode(
            token, secret, algorithms=[ALGORITHM], options={"verify_exp": False, "require": ["exp"]}
        )
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise DataTokenError(TOKEN_INVALID, f"bad token: {type(exc).__name__}") from exc
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
    if claims.get("file") != file or file.partition("/")[0] != chat_id:
        raise DataTokenError(TOKEN_FILE_MISMATCH, "token is for another file")
