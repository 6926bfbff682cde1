"""A loopback JWKS endpoint serving one RSA public key, and tokens signed by its private key."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

JWKS_ISSUER = "https://issuer.example"
JWKS_AUDIENCE = "agent-core"


class JwksServer:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/.well-known/jwks.json"

    def token(self, key: Any = None, **claims: Any) -> str:
        """An RS256 token (kid k1) for `sub` user-jwt of this issuer and audience, valid five minutes."""
        payload = {"sub": "user-jwt", "iss": JWKS_ISSUER, "aud": JWKS_AUDIENCE, "exp": int(time.time()) + 300, **claims}
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": "k1"})

    def __enter__(self) -> JwksServer:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
