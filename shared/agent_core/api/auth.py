"""Identity: who is calling, per AGENT_AUTH_MODE (none / jwt / iam), from the gateway's request context."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from fastapi import Request

from agent_core.api.gateway import request_context
from agent_core.config import Settings
from agent_core.errors import Unauthorized

LOCAL_USER = "local-user"
MAX_USER_ID = 256
# Clock skew allowed on `exp`, `nbf` and `iat` (a token issued in the future beyond it is refused).
JWT_LEEWAY_S = 30
REQUIRED_CLAIMS = ["exp", "sub"]  # a token without `exp` would never expire


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _gateway_claims(context: dict[str, Any]) -> dict[str, Any] | None:
    """Claims API Gateway already verified (REST authorizer, or HTTP API JWT authorizer)."""
    authorizer = context.get("authorizer") or {}
    claims = authorizer.get("claims") or (authorizer.get("jwt") or {}).get("claims")
    return claims if isinstance(claims, dict) else None


def _iam_principal(context: dict[str, Any]) -> str | None:
    """The SigV4 caller: REST v1 `identity`, or a Function URL's / HTTP API's `authorizer.iam`."""
    identity = context.get("identity") or {}
    iam = (context.get("authorizer") or {}).get("iam") or {}
    principal = identity.get("userArn") or iam.get("userArn") or identity.get("caller") or iam.get("callerId")
    return principal if isinstance(principal, str) else None


@lru_cache(maxsize=4)
def _jwks_client(url: str) -> Any:
    import jwt  # imported only in jwt mode: keeps it off every other cold start

    return jwt.PyJWKClient(url, cache_keys=True, lifespan=3600)


def _verify_jwt(token: str, settings: Settings) -> dict[str, Any]:
    import jwt

    if not settings.jwt_jwks_url:
        raise Unauthorized("JWT verification is not configured")
    try:
        key = _jwks_client(settings.jwt_jwks_url).get_signing_key_from_jwt(token)
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=["RS256", "ES256", "PS256"],
            audience=settings.jwt_audience or None,
            issuer=settings.jwt_issuer or None,
            leeway=JWT_LEEWAY_S,
            options={"verify_aud": bool(settings.jwt_audience), "require": REQUIRED_CLAIMS},
        )
    except jwt.PyJWTError as exc:
        raise Unauthorized(f"invalid token: {type(exc).__name__}") from exc
    return claims


def _checked(user_id: str | None) -> str:
    if not user_id or len(user_id) > MAX_USER_ID:
        raise Unauthorized("missing or invalid caller identity")
    return user_id


def resolve_user(request: Request, settings: Settings) -> str:
    """The caller's user id; raises Unauthorized when the mode's credential is missing or invalid."""
    if settings.auth_mode == "none":
        return _checked(request.headers.get("x-user-id") or _bearer(request) or LOCAL_USER)
    context = request_context(request, settings)
    if settings.auth_mode == "iam":
        return _checked(_iam_principal(context))
    claims = _gateway_claims(context)
    if claims is None:
        token = _bearer(request)
        if token is None:
            raise Unauthorized("a Bearer token is required")
        claims = _verify_jwt(token, settings)
    return _checked(str(claims.get("sub") or ""))
