"""The JWT signing keys of `AGENT_JWT_JWKS_URL`: fetched with a short timeout, cached, refreshed sparingly.

Blocking (network I/O): call it from a worker thread, never on the event loop. One fetch at a time per key set:

- a token naming a cached key id uses the cached key (no I/O), whatever another request is fetching;
- an unknown key id refetches the key set, at most once per `min_refresh_s` (failed fetches count too), so a
  stream of tokens with made-up key ids costs the issuer one request per window, and a hanging JWKS holds
  one request for `timeout_s` per window, not every request;
- keys older than `JWKS_MAX_AGE_S` are refetched by one request (the others keep using them meanwhile); a
  fetch that fails keeps the cached keys.

Each key is pinned to the algorithms its type allows (its JWK's `alg`, else RS*/PS* for RSA, the curve's
ES* for EC, EdDSA for OKP); symmetric (`oct`) keys are never used.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_core.observability import logger

JWKS_MAX_BYTES = 1024 * 1024
JWKS_MAX_AGE_S = 3600.0
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHM_BY_CURVE = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
OKP_ALGORITHM_BY_CURVE = {"Ed25519": "EdDSA"}


@dataclass(frozen=True)
class SigningKey:
    """One verification key and the only algorithms a token signed with it may name."""

    key: Any  # a `cryptography` public key
    algorithms: tuple[str, ...]


class JwksUnavailable(Exception):
    """No key set could be fetched and none is cached; `retry_after_s`: when the next fetch may happen."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def key_algorithms(jwk: Mapping[str, Any]) -> tuple[str, ...]:
    """The algorithms a JWK may verify (empty: unusable here, e.g. a symmetric key or an `alg` of another type)."""
    kty, alg, crv = jwk.get("kty"), jwk.get("alg"), jwk.get("crv")
    if kty == "RSA":
        allowed: tuple[str, ...] = RSA_ALGORITHMS
    elif kty == "EC" and crv in EC_ALGORITHM_BY_CURVE:
        allowed = (EC_ALGORITHM_BY_CURVE[crv],)
    elif kty == "OKP" and crv in OKP_ALGORITHM_BY_CURVE:
        allowed = (OKP_ALGORITHM_BY_CURVE[crv],)
    else:
        return ()
    if alg is None:
        return allowed
    return (alg,) if alg in allowed else ()


def parse_key_set(body: bytes) -> dict[str, SigningKey]:
    """The usable signing keys of a JWKS document by key id; ValueError when it is not a key set at all."""
    import jwt  # imported only in jwt mode: keeps it off every other cold start

    document = json.loads(body)
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("not a JWKS document (no `keys` list)")
    keys: dict[str, SigningKey] = {}
    for jwk in entries:
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str) or jwk.get("use", "sig") != "sig":
            continue
        algorithms = key_algorithms(jwk)
        if not algorithms:
            continue
        try:
            key = jwt.PyJWK(jwk, algorithms[0]).key
        except (jwt.PyJWTError, ValueError, TypeError):  # bad key material: skip this key, keep the others
            continue
        keys[jwk["kid"]] = SigningKey(key, algorithms)
    return keys


class JwksCache:
    """The key set at one URL, shared by the threads verifying tokens against it."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        min_refresh_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_age_s: float = JWKS_MAX_AGE_S,
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        self._min_refresh_s = min_refresh_s
        self._max_age_s = max_age_s
        self._clock = clock
        self._keys: dict[str, SigningKey] = {}
        self._fetched_at: float | None = None  # last successful fetch
        self._attempted_at: float | None = None  # last fetch, successful or not
        self._fetching = threading.Lock()

    def key(self, kid: str) -> SigningKey | None:
        """The key named `kid` (None: the key set does not hold it); JwksUnavailable when no key set is known."""
        cached = self._keys.get(kid)
        if cached is not None:
            if self._stale() and self._fetching.acquire(blocking=False):  # one request refreshes, none waits
                try:
                    self._refresh()
                finally:
                    self._fetching.release()
                return self._keys.get(kid)  # gone when the issuer dropped it
            return cached
        with self._fetching:  # waits at most for the fetch under way, then sees its keys
            if kid not in self._keys:
                self._refresh()
            if kid not in self._keys and self._fetched_at is None:
                raise JwksUnavailable("the JWT signing keys could not be fetched", self._retry_after_s())
            return self._keys.get(kid)

    def _stale(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at >= self._max_age_s

    def _retry_after_s(self) -> int:
        if self._attempted_at is None:
            return 1
        return max(1, math.ceil(self._attempted_at + self._min_refresh_s - self._clock()))

    def _refresh(self) -> None:
        """Fetch the key set unless the last fetch was less than `min_refresh_s` ago (caller holds the lock)."""
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < self._min_refresh_s:
            return
        self._attempted_at = now
        try:
            keys = parse_key_set(self._download())
        except (OSError, ValueError, http.client.HTTPException, RecursionError) as exc:  # keep what is cached
            logger.warning("JWKS fetch failed; keeping the cached keys", extra={"error": f"{type(exc).__name__}"})
            return
        self._keys, self._fetched_at = keys, self._clock()

    def _download(self) -> bytes:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
            body: bytes = response.read(JWKS_MAX_BYTES + 1)
        if len(body) > JWKS_MAX_BYTES:
            raise ValueError(f"JWKS document larger than {JWKS_MAX_BYTES} bytes")
        return body
