"""Data tokens: signing, verification, each error code, and the order of the checks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from agent_core.tools.data_token import (
    READ_SCOPE,
    TOKEN_EXPIRED,
    TOKEN_FILE_MISMATCH,
    TOKEN_INVALID,
    TOKEN_SCOPE_MISMATCH,
    DataTokenError,
    sign_data_token,
    verify_data_token,
)

SECRET = "s3cret"
NOW = 1_700_000_000.0
FILE = "c1/report.csv"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _code(token: str, *, chat_id: str = "c1", file: str = FILE, now: float = NOW, secret: str = SECRET) -> str:
    with pytest.raises(DataTokenError) as info:
        verify_data_token(secret, token, chat_id, file, now)
    return info.value.error_code


def _forged(claims: dict[str, object], secret: str = SECRET) -> str:
    body = _b64(json.dumps(claims).encode())
    return f"{body}.{_b64(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())}"


def test_token_shape_and_claims() -> None:
    # Given a signed token
    token = sign_data_token(SECRET, "c1", FILE, 3600, NOW)
    body, signature = token.split(".")
    # Then both halves are unpadded base64url and the claims are the documented ones
    assert "=" not in token and "+" not in token and "/" not in token
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert claims == {"scope": READ_SCOPE, "chatId": "c1", "file": FILE, "exp": int(NOW) + 3600}
    expected = hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).digest()
    assert signature == _b64(expected)


def test_valid_token_verifies_until_expiry() -> None:
    token = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    verify_data_token(SECRET, token, "c1", FILE, NOW)
    verify_data_token(SECRET, token, "c1", FILE, NOW + 59)
    assert _code(token, now=NOW + 60) == TOKEN_EXPIRED


@pytest.mark.parametrize(
    "token",
    [
        "",
        "no-dot",
        ".",
        "abc.",
        ".abc",
        "a.b.c",
        "abc.d=ef",
        "ab+c.def",
        "%%%.def",
        "x" * 5000 + ".y",
    ],
)
def test_malformed_tokens_are_invalid(token: str) -> None:
    assert _code(token) == TOKEN_INVALID


def test_signature_mismatches_are_invalid() -> None:
    token = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    body, signature = token.split(".")
    assert _code(token, secret="other") == TOKEN_INVALID
    assert _code(f"{body}.{signature[:-1]}") == TOKEN_INVALID
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    assert _code(f"{body}.{flipped}") == TOKEN_INVALID
    other_body = _b64(json.dumps({"scope": READ_SCOPE, "chatId": "c1", "file": FILE, "exp": 2**40}).encode())
    assert _code(f"{other_body}.{signature}") == TOKEN_INVALID
    assert _code(token, secret="") == TOKEN_INVALID


@pytest.mark.parametrize(
    "claims",
    [[1, 2], {"scope": READ_SCOPE, "chatId": "c1", "file": FILE}, {"exp": "soon"}, {"exp": True}],
)
def test_signed_but_unreadable_claims_are_invalid(claims: object) -> None:
    body = _b64(json.dumps(claims).encode())
    token = f"{body}.{_b64(hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).digest())}"
    assert _code(token) == TOKEN_INVALID


def test_each_error_code() -> None:
    assert _code(sign_data_token(SECRET, "c1", FILE, 10, NOW - 100)) == TOKEN_EXPIRED
    assert _code(sign_data_token(SECRET, "c1", FILE, 10, NOW, scope="ap_data:write")) == TOKEN_SCOPE_MISMATCH
    assert _code(sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW)) == TOKEN_FILE_MISMATCH
    assert _code(sign_data_token(SECRET, "c2", "c2/report.csv", 10, NOW)) == TOKEN_FILE_MISMATCH
    forged_chat = _forged({"scope": READ_SCOPE, "chatId": "c2", "file": FILE, "exp": int(NOW) + 10})
    assert _code(forged_chat) == TOKEN_FILE_MISMATCH


def test_check_order() -> None:
    # Expired and for another file: the expiry is reported
    assert _code(sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW - 100)) == TOKEN_EXPIRED
    # A bad signature on an expired token: the signature is reported
    expired = sign_data_token(SECRET, "c1", FILE, 10, NOW - 100)
    assert _code(expired, secret="wrong") == TOKEN_INVALID
    # Wrong scope and wrong file: the scope is reported
    both = sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW, scope="ap_data:write")
    assert _code(both) == TOKEN_SCOPE_MISMATCH
    # Everything wrong at once: the signature is reported
    assert _code(sign_data_token("x", "c2", "c2/y", 10, NOW - 100, scope="nope")) == TOKEN_INVALID


def test_signing_refuses_an_empty_secret_or_a_file_outside_the_chat() -> None:
    with pytest.raises(ValueError):
        sign_data_token("", "c1", FILE, 10, NOW)
    with pytest.raises(ValueError):
        sign_data_token(SECRET, "c1", "c2/report.csv", 10, NOW)
