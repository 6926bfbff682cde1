"""Identity per AGENT_AUTH_MODE: none (header, bearer, local-user), iam (request context), jwt (claims or JWKS)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from starlette.testclient import TestClient

from agent_core.api.auth import LOCAL_USER, resolve_user
from agent_core.api.errors import install_error_handlers
from tests.support.fixtures import make_settings
from tests.support.jwks import JWKS_AUDIENCE, JWKS_ISSUER, JwksServer

ISSUER, AUDIENCE = JWKS_ISSUER, JWKS_AUDIENCE


def _app(event: dict[str, Any] | None = None, *, raise_errors: bool = True, **settings: Any) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    configured = make_settings(**settings)

    @app.get("/whoami")
    async def whoami(request: Request) -> dict[str, str]:
        if event is not None:
            request.scope["aws.event"] = event
        return {"user": await resolve_user(request, configured)}

    return TestClient(app, raise_server_exceptions=raise_errors)


def test_none_mode_prefers_x_user_id_then_bearer_then_local_user() -> None:
    client = _app()
    assert client.get("/whoami", headers={"X-User-Id": "u1", "Authorization": "Bearer t"}).json() == {"user": "u1"}
    assert client.get("/whoami", headers={"Authorization": "Bearer sk-abc"}).json() == {"user": "sk-abc"}
    assert client.get("/whoami").json() == {"user": LOCAL_USER}


def test_iam_mode_uses_the_callers_principal_and_refuses_without_one() -> None:
    event = {"requestContext": {"identity": {"userArn": "arn:aws:iam::123456789012:user/ops"}}}
    assert _app(event, AGENT_AUTH_MODE="iam").get("/whoami").json() == {"user": "arn:aws:iam::123456789012:user/ops"}
    v2 = {"requestContext": {"authorizer": {"iam": {"userArn": "arn:aws:sts::1:assumed-role/r/s"}}}}
    assert _app(v2, AGENT_AUTH_MODE="iam").get("/whoami").json() == {"user": "arn:aws:sts::1:assumed-role/r/s"}
    refused = _app({}, AGENT_AUTH_MODE="iam").get("/whoami", headers={"X-User-Id": "spoof"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


def test_jwt_mode_trusts_claims_api_gateway_verified() -> None:
    rest = {"requestContext": {"authorizer": {"claims": {"sub": "user-rest"}}}}
    http = {"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "user-http"}}}}}
    assert _app(rest, AGENT_AUTH_MODE="jwt").get("/whoami").json() == {"user": "user-rest"}
    assert _app(http, AGENT_AUTH_MODE="jwt").get("/whoami").json() == {"user": "user-http"}


@pytest.fixture(scope="module")
def jwks() -> Iterator[JwksServer]:
    with JwksServer() as server:
        yield server


def test_jwt_mode_verifies_bearer_tokens_against_the_jwks(jwks: JwksServer) -> None:
    url, key, _token = jwks.url, jwks.key, jwks.token
    client = _app(
        {}, AGENT_AUTH_MODE="jwt", AGENT_JWT_JWKS_URL=url, AGENT_JWT_ISSUER=ISSUER, AGENT_JWT_AUDIENCE=AUDIENCE
    )
    ok = client.get("/whoami", headers={"Authorization": f"Bearer {_token(key)}"})
    assert ok.json() == {"user": "user-jwt"}
    for bad in (
        _token(key, aud="someone-else"),
        _token(key, iss="https://evil.example"),
        _token(key, exp=int(time.time()) - 60),
        _token(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    ):
        refused = client.get("/whoami", headers={"Authorization": f"Bearer {bad}"})
        assert refused.status_code == 401, bad
    assert client.get("/whoami").status_code == 401


def _signed(key: Any, claims: dict[str, Any]) -> str:
    """Exactly these claims (no defaults added), signed with the JWKS server's key id."""
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_jwt_mode_requires_exp_and_bounds_iat_and_nbf(jwks: JwksServer) -> None:
    url, key = jwks.url, jwks.key
    client = _app(
        {}, AGENT_AUTH_MODE="jwt", AGENT_JWT_JWKS_URL=url, AGENT_JWT_ISSUER=ISSUER, AGENT_JWT_AUDIENCE=AUDIENCE
    )
    now = int(time.time())
    base = {"sub": "user-jwt", "iss": ISSUER, "aud": AUDIENCE}

    def who(claims: dict[str, Any]) -> Any:
        return client.get("/whoami", headers={"Authorization": f"Bearer {_signed(key, claims)}"})

    # A correctly signed token without `exp` would never expire: refused
    no_exp = who(base)
    assert no_exp.status_code == 401 and no_exp.json()["error"]["code"] == "unauthorized"
    assert "MissingRequiredClaim" in no_exp.json()["error"]["message"]
    # Issued, or valid only from, beyond the allowed clock skew in the future: refused
    assert who({**base, "exp": now + 3600, "iat": now + 600}).status_code == 401
    assert who({**base, "exp": now + 3600, "nbf": now + 600}).status_code == 401
    # Within the skew (a slightly fast issuer clock), and without `iat` or `nbf`: accepted
    assert who({**base, "exp": now + 300, "iat": now + 10, "nbf": now + 10}).json() == {"user": "user-jwt"}
    assert who({**base, "exp": now + 300}).json() == {"user": "user-jwt"}
    # No subject: no caller identity
    assert who({"iss": ISSUER, "aud": AUDIENCE, "exp": now + 300}).status_code == 401


def _segment(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forged(header: dict[str, Any], claims: dict[str, Any], sign: Any = None) -> str:
    """A token with exactly this header, signed by `sign(signing_input)` (no signature when None)."""
    signing_input = f"{_segment(json.dumps(header).encode())}.{_segment(json.dumps(claims).encode())}"
    signature = sign(signing_input.encode()) if sign is not None else b""
    return f"{signing_input}.{_segment(signature)}"


def test_jwt_mode_answers_every_forged_or_malformed_token_401_without_a_traceback(
    jwks: JwksServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = _app(
        {},
        raise_errors=False,
        AGENT_AUTH_MODE="jwt",
        AGENT_JWT_JWKS_URL=jwks.url,
        AGENT_JWT_ISSUER=ISSUER,
        AGENT_JWT_AUDIENCE=AUDIENCE,
    )
    claims = {"sub": "mallory", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    public_pem = jwks.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forged = {
        # ES256 in the header, the RSA key's kid (PyJWT raises TypeError when the header chooses the algorithm)
        "ES256 naming the RSA key": jwks.token(jwks.ec_key, algorithm="ES256", sub="mallory"),
        "RS256 naming the EC key": jwks.token(jwks.key, kid="e1", sub="mallory"),
        # Signed by the right key, but k1's JWK says `alg: RS256`: only that algorithm verifies with it
        "PS256 with the RS256 key": jwks.token(jwks.key, algorithm="PS256", sub="mallory"),
        "alg none": _forged({"alg": "none", "typ": "JWT", "kid": "k1"}, claims),
        # The classic confusion: HMAC keyed with the RSA public key, which anyone can download
        "HS256 keyed with the public key": _forged(
            {"alg": "HS256", "typ": "JWT", "kid": "k1"},
            claims,
            lambda data: hmac.new(public_pem, data, hashlib.sha256).digest(),
        ),
        "no kid": jwt.encode(claims, jwks.key, algorithm="RS256"),
        "kid not a string": _forged(
            {"alg": "RS256", "kid": 1}, claims, lambda data: jwt.get_algorithm_by_name("RS256").sign(data, jwks.key)
        ),
        "unknown kid": jwks.token(jwks.key, kid="k-unknown", sub="mallory"),
        "huge header": jwt.encode(claims, jwks.key, algorithm="RS256", headers={"kid": "k1", "x": "a" * 20_000}),
        "one segment": "garbage",
        "empty segments": "..",
        "garbage segments": "abc.def.ghi",
        "header not JSON": f"{_segment(b'not json')}.{_segment(b'{}')}.",
        "header a JSON list": f"{_segment(b'[]')}.{_segment(b'{}')}.",
        "header not UTF-8": f"{_segment(bytes([0xFF, 0xFE]))}.{_segment(b'{}')}.",
        "claims not JSON": f"{_segment(json.dumps({'alg': 'RS256', 'kid': 'k1'}).encode())}.!!!.sig",
        "four segments": "a.b.c.d",
        "deeply nested header": _segment(b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}") + "." + _segment(b"{}") + ".",
    }
    caplog.set_level(logging.DEBUG)
    for name, token in forged.items():
        refused = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == 401, (name, refused.text)
        assert refused.json()["error"]["code"] == "unauthorized", name
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    assert "Traceback" not in caplog.text
    # The same keys still verify the tokens they did sign, each with its own algorithm
    assert client.get("/whoami", headers={"Authorization": f"Bearer {jwks.token()}"}).json() == {"user": "user-jwt"}
    ec_token = jwks.token(jwks.ec_key, kid="e1", algorithm="ES256")
    assert client.get("/whoami", headers={"Authorization": f"Bearer {ec_token}"}).json() == {"user": "user-jwt"}
