"""Data tokens: signing, verification, each error code, and the order of the checks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys

import jwt
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

SECRET = "s3cret-data-link-key-of-32-bytes"
NOW = 1_700_000_000.0
FILE = "c1/report.csv"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _code(token: str, *, chat_id: str = "c1", file: str = FILE, now: float = NOW, secret: str = SECRET) -> str:
    with pytest.raises(DataTokenError) as info:
        verify_data_token(secret, token, chat_id, file, now)
    return info.value.error_code


def _forged(claims: object, secret: str = SECRET, header: object = None) -> str:
    """A correctly signed HS256 JWS over any JSON claims (and header)."""
    head = _b64(json.dumps({"alg": "HS256"} if header is None else header).encode())
    body = _b64(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


def test_token_is_a_compact_hs256_jwt_with_the_documented_claims() -> None:
    # Given a signed token
    token = sign_data_token(SECRET, "c1", FILE, 3600, NOW)
    header, body, signature = token.split(".")
    # Then it is three unpadded base64url segments: a bare HS256 header (no typ, for short links) and the claims
    assert "=" not in token and "+" not in token and "/" not in token
    assert json.loads(_unb64(header)) == {"alg": "HS256"}
    assert json.loads(_unb64(body)) == {"scope": READ_SCOPE, "file": FILE, "exp": int(NOW) + 3600}
    # And the signature is HMAC-SHA256 over `header.body` with the key (any JWT library verifies it)
    expected = hmac.new(SECRET.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    assert signature == _b64(expected)
    assert jwt.decode(token, SECRET, algorithms=["HS256"], options={"verify_exp": False})["file"] == FILE


def test_valid_token_verifies_until_expiry() -> None:
    token = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    verify_data_token(SECRET, token, "c1", FILE, NOW)
    verify_data_token(SECRET, token, "c1", FILE, NOW + 59)
    assert _code(token, now=NOW + 60) == TOKEN_EXPIRED


def test_expiry_follows_the_callers_clock_not_the_wall_clock() -> None:
    # A token that expired in 2023 by the wall clock is valid on a clock set before its expiry, and the reverse
    old = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    verify_data_token(SECRET, old, "c1", FILE, NOW + 1)
    future = sign_data_token(SECRET, "c1", FILE, 60, 4_000_000_000.0)
    assert _code(future, now=4_000_000_060.0) == TOKEN_EXPIRED


@pytest.mark.parametrize(
    "token",
    [
        "",
        "no-dot",
        ".",
        "abc.",
        ".abc",
        "a.b",
        "a.b.c",
        "a.b.c.d",
        "abc.d=ef.ghi",
        "ab+c.def.ghi",
        "%%%.def.ghi",
        "x" * 5000 + ".y.z",
    ],
)
def test_malformed_tokens_are_invalid(token: str) -> None:
    assert _code(token) == TOKEN_INVALID


def test_signature_mismatches_are_invalid() -> None:
    token = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    header, body, signature = token.split(".")
    assert _code(token, secret="other-data-link-key-of-32-bytes!") == TOKEN_INVALID
    assert _code(f"{header}.{body}.{signature[:-1]}") == TOKEN_INVALID
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    assert _code(f"{header}.{body}.{flipped}") == TOKEN_INVALID
    other_body = _b64(json.dumps({"scope": READ_SCOPE, "file": FILE, "exp": 2**40}).encode())
    assert _code(f"{header}.{other_body}.{signature}") == TOKEN_INVALID
    assert _code(token, secret="") == TOKEN_INVALID


def test_a_signature_has_one_spelling() -> None:
    # The last base64 character of a 32-byte signature carries 2 spare bits: another spelling of the same bytes
    token = sign_data_token(SECRET, "c1", FILE, 60, NOW)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(token[-1])
    respelt = token[:-1] + alphabet[last ^ 1]
    assert _unb64(respelt.rpartition(".")[2]) == _unb64(token.rpartition(".")[2])
    assert _code(respelt) == TOKEN_INVALID


@pytest.mark.parametrize(
    "header",
    [{"alg": "none"}, {"alg": "HS512"}, {"alg": "RS256"}, {"alg": "ES256"}, {}],
)
def test_only_hs256_is_accepted(header: dict[str, str]) -> None:
    claims = {"scope": READ_SCOPE, "file": FILE, "exp": int(NOW) + 60}
    assert _code(_forged(claims, header=header)) == TOKEN_INVALID
    unsigned = f"{_b64(json.dumps({'alg': 'none'}).encode())}.{_b64(json.dumps(claims).encode())}."
    assert _code(unsigned) == TOKEN_INVALID
    if header.get("alg") == "HS512":
        hs512 = jwt.encode(claims, SECRET + SECRET, algorithm="HS512")
        assert _code(hs512, secret=SECRET + SECRET) == TOKEN_INVALID


@pytest.mark.parametrize(
    "claims",
    [[1, 2], "text", {"scope": READ_SCOPE, "file": FILE}, {"exp": "soon"}, {"exp": True}, {"exp": None}],
)
def test_signed_but_unreadable_claims_are_invalid(claims: object) -> None:
    assert _code(_forged(claims)) == TOKEN_INVALID


def test_each_error_code() -> None:
    assert _code(sign_data_token(SECRET, "c1", FILE, 10, NOW - 100)) == TOKEN_EXPIRED
    assert _code(sign_data_token(SECRET, "c1", FILE, 10, NOW, scope="ap_data:write")) == TOKEN_SCOPE_MISMATCH
    assert _code(sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW)) == TOKEN_FILE_MISMATCH
    assert _code(sign_data_token(SECRET, "c2", "c2/report.csv", 10, NOW)) == TOKEN_FILE_MISMATCH
    # The file names the chat: a token for c1's file does not open it as another chat's
    token = sign_data_token(SECRET, "c1", FILE, 10, NOW)
    assert _code(token, chat_id="c2") == TOKEN_FILE_MISMATCH
    assert _code(_forged({"scope": READ_SCOPE, "exp": int(NOW) + 10})) == TOKEN_FILE_MISMATCH


def test_check_order() -> None:
    # Expired and for another file: the expiry is reported
    assert _code(sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW - 100)) == TOKEN_EXPIRED
    # A bad signature on an expired token: the signature is reported
    expired = sign_data_token(SECRET, "c1", FILE, 10, NOW - 100)
    assert _code(expired, secret="wrong-data-link-key-of-32-bytes!") == TOKEN_INVALID
    # Wrong scope and wrong file: the scope is reported
    both = sign_data_token(SECRET, "c1", "c1/other.csv", 10, NOW, scope="ap_data:write")
    assert _code(both) == TOKEN_SCOPE_MISMATCH
    # Everything wrong at once: the signature is reported
    assert _code(sign_data_token("x" * 32, "c2", "c2/y", 10, NOW - 100, scope="nope")) == TOKEN_INVALID


def test_signing_refuses_an_empty_secret_or_a_file_outside_the_chat() -> None:
    with pytest.raises(ValueError):
        sign_data_token("", "c1", FILE, 10, NOW)
    with pytest.raises(ValueError):
        sign_data_token(SECRET, "c1", "c2/report.csv", 10, NOW)


def test_link_token_length() -> None:
    # A token for a generated chat id and a typical name stays well under 200 characters
    token = sign_data_token(SECRET, "c_abcdefghijkl", "c_abcdefghijkl/report-2026-q1.csv", 3600, NOW)
    assert len(token) < 200, len(token)


def test_importing_the_data_links_loads_no_jwt_library() -> None:
    # PyJWT loads `cryptography` (~100 ms): the data function's cold start pays for it on its first check only
    code = "import sys, agent_core.tools.data_links; print('jwt' in sys.modules, 'cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
