"""A loopback JWKS endpoint serving an RSA public key (kid k1, RS256) and an EC P-256 one (kid e1, no `alg`),
and tokens signed by their private keys.

It counts the fetches it answers, can be held (each fetch waits until the test releases it, to play an issuer
that hangs), can fail (HTTP 500), and can publish further keys (a key rotation).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.loopback import Loopback, LoopbackServer

JWKS_ISSUER = "https://issuer.example"
JWKS_AUDIENCE = "agent-core"


class Hold:
    """A fetch has reached the server (`entered`); none is answered until the test sets `release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


def public_jwk(key: Any, kid: str, **extra: str) -> dict[str, Any]:
    """The public JWK of a private RSA or EC key."""
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    return {**json.loads(algorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig", **extra}


class JwksServer(Loopback):
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec_key = ec.generate_private_key(ec.SECP256R1())
        self.jwks: list[dict[str, Any]] = [public_jwk(self.key, "k1", alg="RS256"), public_jwk(self.ec_key, "e1")]
        self.fetches = 0
        self.failing = False
        self._hold: Hold | None = None
        self._count = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._count:
                    owner.fetches += 1
                hold = owner._hold
                if hold is not None:
                    hold.entered.set()
                    hold.release.wait()
                status, body = (500, b"{}") if owner.failing else (200, json.dumps({"keys": owner.jwks}).encode())
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up waiting (its timeout) before a held fetch was released
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return None

        super().__init__(LoopbackServer(("127.0.0.1", 0), Handler), "jwks")
        self.url = f"{self.origin}/.well-known/jwks.json"

    def token(self, key: Any = None, *, kid: str = "k1", algorithm: str = "RS256", **claims: Any) -> str:
        """A token (RS256, kid k1 by default) for `sub` user-jwt of this issuer and audience, valid five minutes."""
        payload = {"sub": "user-jwt", "iss": JWKS_ISSUER, "aud": JWKS_AUDIENCE, "exp": int(time.time()) + 300, **claims}
        return jwt.encode(payload, key or self.key, algorithm=algorithm, headers={"kid": kid})

    @contextmanager
    def held(self) -> Iterator[Hold]:
        """Every fetch waits (after counting) until `release` is set, or the block ends."""
        hold = Hold()
        self._hold = hold
        try:
            yield hold
        finally:
            self._hold = None
            hold.release.set()

    def stop(self) -> None:
        hold = self._hold
        if hold is not None:
            hold.release.set()
        super().stop()
