"""Identity per AGENT_AUTH_MODE: none (header, bearer, local-user), iam (request context), jwt (claims or JWKS)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from starlette.testclient import TestClient

from agent_core.api.auth import LOCAL_USER, resolve_user
from agent_core.api.errors import install_error_handlers
from tests.support.fixtures import make_settings
from tests.support.jwks import JWKS_AUDIENCE, JWKS_ISSUER, JwksServer

ISSUER, AUDIENCE = JWKS_ISSUER, JWKS_AUDIENCE


def _app(event: dict[str, Any] | None = None, **settings: Any) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    configured = make_settings(**settings)

    @app.get("/whoami")
    async def whoami(request: Request) -> dict[str, str]:
        if event is not None:
            request.scope["aws.event"] = event
        return {"user": resolve_user(request, configured)}

    return TestClient(app)


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
