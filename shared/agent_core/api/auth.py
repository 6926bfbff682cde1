"""Identity: who is calling, per AGENT_AUTH_MODE (none / jwt / iam), from the gateway's request context."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import anyio.to_thread
from fastapi import Request

from agent_core.api.gateway import request_context
from agent_core.api.jwks import JwksCache, JwksUnavailable
from agent_core.config import Settings
from agent_core.errors import ServiceUnavailable, Unauthorized

LOCAL_USER = "local-user"
MAX_USER_ID = 256
# Clock skew allowed on `exp`, `nbf` and `iat` (a token issued in the future beyond it is refused).
JWT_LEEWAY_S = 30
REQUIRED_CLAIMS = ["exp", "sub"]  # a token without `exp` would never expire
MAX_TOKEN_CHARS = 16384  # beyond any issuer's token (and most gateways' header limits): refused unparsed


class SigningKeysUnavailable(ServiceUnavailable):
    """The JWKS could not be fetched and no key is cached: the token cannot be checked yet (503, Retry-After)."""

    code = "jwks_unavailable"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


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
def _key_set(url: str, timeout_s: float, min_refresh_s: float) -> JwksCache:
    return JwksCache(url, timeout_s, min_refresh_s)


def _invalid(reason: str) -> Unauthorized:
    return Unauthorized(f"invalid token: {reason}")


def verify_jwt(token: str, settings: Settings) -> dict[str, Any]:
    """The claims of a Bearer token signed by a key of the JWKS. Blocking (it may fetch the key set): run it in
    a worker thread. Unauthorized (401) for any token that does not verify, malformed or forged ones included;
    SigningKeysUnavailable (503) when no key set could be fetched."""
    import jwt  # imported only in jwt mode: keeps it off every other cold start

    if not settings.jwt_jwks_url:
        raise Unauthorized("JWT verification is not configured")
    if len(token) > MAX_TOKEN_CHARS:
        raise _invalid(f"longer than {MAX_TOKEN_CHARS} characters")
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError as exc:
        raise _invalid(type(exc).__name__) from exc
    if not isinstance(kid, str) or not kid:
        raise _invalid("no key id (kid) in its header")
    keys = _key_set(settings.jwt_jwks_url, settings.jwt_jwks_timeout_s, settings.jwt_jwks_min_refresh_s)
    try:
        key = keys.key(kid)
    except JwksUnavailable as exc:
        raise SigningKeysUnavailable(str(exc), retry_after_s=exc.retry_after_s) from exc
    if key is None:
        raise _invalid("unknown key id (kid)")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=list(key.algorithms),  # the key's own: never the algorithm the header asks for
            audience=settings.jwt_audience or None,
            issuer=settings.jwt_issuer or None,
            leeway=JWT_LEEWAY_S,
            options={"verify_aud": bool(settings.jwt_audience), "require": REQUIRED_CLAIMS},
        )
    except (jwt.PyJWTError, ValueError, TypeError) as exc:  # PyJWT raises the last two on some forged tokens
        raise _invalid(type(exc).__name__) from exc
    return claims


def _checked(user_id: str | None) -> str:
    if not user_id or len(user_id) > MAX_USER_ID:
        raise Unauthorized("missing or invalid caller identity")
    return user_id


async def resolve_user(request: Request, settings: Settings) -> str:
    """The caller's user id; raises Unauthorized when the mode's credential is missing or invalid.

    A Bearer token is verified in a worker thread: fetching the key set must never stall the event loop."""
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
        claims = await anyio.to_thread.run_sync(verify_jwt, token, settings)
    return _checked(str(claims.get("sub") or ""))
