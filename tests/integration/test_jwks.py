"""JWT mode against a JWKS that hangs, fails or rotates: verification never stalls the event loop, a fetch
waits at most AGENT_JWT_JWKS_TIMEOUT_S, refetches are rate-limited, cached keys outlive a failing issuer."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from agent_core.api.app import build_app
from agent_core.api.jwks import JwksCache, key_algorithms
from agent_core.api.routes import data
from agent_core.context import build_context
from agent_core.domain.models import Chat
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.jwks import JWKS_AUDIENCE, JWKS_ISSUER, JwksServer, public_jwk

CHAT = "c_jwt1"
FILE = f"{CHAT}/report.csv"
CSV = b"a,b\n1,2\n"


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    """A JWKS of its own per test: its URL keys a key-set cache no other test shares."""
    with JwksServer() as server:
        yield server


@asynccontextmanager
async def _client(jwks: JwksServer, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The data route in jwt mode (one event loop for every request); user-jwt owns CHAT and its file."""
    blobs = MemoryBlobStore()
    configured = make_settings(
        AGENT_AUTH_MODE="jwt",
        AGENT_JWT_JWKS_URL=jwks.url,
        AGENT_JWT_ISSUER=JWKS_ISSUER,
        AGENT_JWT_AUDIENCE=JWKS_AUDIENCE,
        AGENT_DATA_TOKEN_SECRET="test-data-secret-link-key-32-bytes",
        **settings,
    )
    ctx = build_context(configured, table=MemoryTable(), blobs=blobs)
    await ctx.deps.chats.create_chat(Chat(chat_id=CHAT, user_id="user-jwt", created_at=1, last_activity_at=1))
    await blobs.put(f"data/{FILE}", CSV, "text/csv")
    transport = httpx.ASGITransport(app=build_app(data.router, context=ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def _get(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.get("/api/ap/data", params={"file": FILE}, headers={"Authorization": f"Bearer {token}"})


@functools.cache
def _stranger_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _stranger_token(jwks: JwksServer, kid: str) -> str:
    """Signed by a key the JWKS does not publish, naming a key id it does not know."""
    return jwks.token(_stranger_key(), kid=kid)


async def test_a_request_held_by_a_hanging_jwks_does_not_stall_the_others(jwks: JwksServer) -> None:
    # The timeout is far beyond the test: the held fetch ends only when the test releases it
    async with _client(jwks, AGENT_JWT_JWKS_TIMEOUT_S=60, AGENT_JWT_JWKS_MIN_REFRESH_S=0) as client:
        assert (await _get(client, jwks.token())).content == CSV  # k1 is now cached
        assert jwks.fetches == 1
        with jwks.held() as hold:
            # A token naming an unknown key id makes its request refetch the key set: the JWKS holds that fetch
            first = asyncio.create_task(_get(client, _stranger_token(jwks, "k-unknown")))
            await asyncio.to_thread(hold.entered.wait)
            # Meanwhile, on the same event loop, a request with a cached key is served in full
            second = await _get(client, jwks.token())
            assert second.status_code == 200 and second.content == CSV
            assert not first.done() and not hold.release.is_set() and jwks.fetches == 2
            hold.release.set()
            refused = await first
        # The refetched key set does not hold that key id either
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


async def test_a_jwks_that_never_answers_costs_one_request_the_timeout_then_503_at_once(jwks: JwksServer) -> None:
    async with _client(jwks, AGENT_JWT_JWKS_TIMEOUT_S=0.2, AGENT_JWT_JWKS_MIN_REFRESH_S=3600) as client:
        with jwks.held() as hold:
            answer = await _get(client, jwks.token())
            # Nothing released the fetch: the request gave up on its own (the timeout)
            assert not hold.release.is_set()
            assert answer.status_code == 503 and answer.json()["error"]["code"] == "jwks_unavailable"
            assert 1 <= int(answer.headers["Retry-After"]) <= 3600
            # Within the refresh window nobody waits on the issuer again
            again = await _get(client, jwks.token())
            assert again.status_code == 503
            await asyncio.to_thread(hold.entered.wait)  # the server may see the fetch after the client gave up
            assert jwks.fetches == 1


async def test_concurrent_unknown_key_ids_share_one_fetch(jwks: JwksServer) -> None:
    async with _client(jwks, AGENT_JWT_JWKS_TIMEOUT_S=60, AGENT_JWT_JWKS_MIN_REFRESH_S=3600) as client:
        with jwks.held() as hold:
            waiting = [asyncio.create_task(_get(client, _stranger_token(jwks, f"k-made-up-{i}"))) for i in range(5)]
            await asyncio.to_thread(hold.entered.wait)
            hold.release.set()
            answers = await asyncio.gather(*waiting)
        assert [a.status_code for a in answers] == [401] * 5
        more = [await _get(client, _stranger_token(jwks, f"k-later-{i}")) for i in range(5)]
        assert [a.status_code for a in more] == [401] * 5
        assert (await _get(client, jwks.token())).status_code == 200
        assert jwks.fetches == 1  # one fetch for eleven requests, ten of them naming unknown key ids


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refetches_are_rate_limited_and_cached_keys_survive_a_failing_issuer(jwks: JwksServer) -> None:
    clock = _Clock()
    cache = JwksCache(jwks.url, timeout_s=5, min_refresh_s=60, clock=clock, max_age_s=3600)
    assert cache.key("k1") is not None and jwks.fetches == 1
    # Unknown key ids right after a fetch: no refetch within the window
    assert [cache.key(f"made-up-{i}") for i in range(10)] == [None] * 10
    assert jwks.fetches == 1
    # The issuer rotates in k2: picked up by the first unknown key id after the window, once
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks.jwks.append(public_jwk(rotated, "k2", alg="RS256"))
    clock.now += 61
    assert cache.key("k2") is not None and jwks.fetches == 2
    assert [cache.key(f"made-up-{i}") for i in range(10)] == [None] * 10
    assert jwks.fetches == 2
    # The issuer fails: the refetch fails, the cached keys keep verifying
    jwks.failing = True
    clock.now += 61
    assert cache.key("made-up-after-failure") is None and jwks.fetches == 3
    assert cache.key("k1") is not None and cache.key("k2") is not None and jwks.fetches == 3
    # Keys past their age are refetched by one request; a failed refetch keeps them
    clock.now += 3600
    assert cache.key("k1") is not None and jwks.fetches == 4
    assert cache.key("k1") is not None and jwks.fetches == 4  # the failure counts towards the window
    # The issuer is back and has dropped k2: the next refetch forgets it
    jwks.failing = False
    jwks.jwks = [k for k in jwks.jwks if k["kid"] != "k2"]
    clock.now += 61
    assert cache.key("k2") is None and cache.key("k1") is not None and jwks.fetches == 5


def test_the_key_set_keeps_only_signature_keys_each_pinned_to_its_algorithms() -> None:
    assert key_algorithms({"kty": "RSA", "alg": "RS256"}) == ("RS256",)
    assert key_algorithms({"kty": "RSA"}) == ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
    assert key_algorithms({"kty": "EC", "crv": "P-384"}) == ("ES384",)
    assert key_algorithms({"kty": "EC", "crv": "P-256", "alg": "ES384"}) == ()  # alg and curve disagree
    assert key_algorithms({"kty": "RSA", "alg": "HS256"}) == ()
    assert key_algorithms({"kty": "oct", "k": "c2VjcmV0"}) == ()  # a shared secret never verifies here
    assert key_algorithms({"kty": "OKP", "crv": "Ed25519"}) == ("EdDSA",)
