"""The Embedder port's adapters on their real wires: the openai SDK against a loopback `/v1/embeddings`, boto3
against a loopback Bedrock Runtime `InvokeModel` (Titan Text Embeddings v2), and the offline hashing default;
then the whole memory path (import, records job, search) with a provider's vectors."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import build_context, build_embedder
from agent_core.memory.embedders import OpenAiEmbedder, TitanEmbedder
from agent_core.memory.embedding import HashingEmbedder, hash_vector
from agent_core.store.memory_table import MemoryTable
from tests.support.bedrock_stub import BedrockStub
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub

TEXTS = ["We hiked in Patagonia with Clara", "Clara loves hiking in Patagonia", "The piano lesson is on Monday"]


def _close(vectors: list[np.ndarray]) -> tuple[float, float]:
    return float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])


async def test_the_openai_embedder_posts_v1_embeddings_through_the_sdk(openai_stub: OpenAiStub) -> None:
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="sk-test"
    )
    embedder = build_embedder(settings.model_copy(update={"memory_embedder": "openai"}))
    assert isinstance(embedder, OpenAiEmbedder) and embedder.name == "openai:text-embedding-3-small:1024"
    vectors = await embedder.embed(TEXTS)
    (request,) = openai_stub.embedding_requests
    assert request["model"] == "text-embedding-3-small" and request["dimensions"] == 1024
    assert request["input"] == TEXTS
    assert openai_stub.embedding_headers[0]["authorization"] == "Bearer sk-test"
    assert all(v.dtype == np.float32 and v.shape == (1024,) for v in vectors)
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in vectors)  # normalised by the adapter
    similar, different = _close(vectors)
    assert similar > different


async def test_the_titan_embedder_invokes_the_model_once_per_text(bedrock_stub: BedrockStub) -> None:
    settings = make_settings(AGENT_MEMORY_EMBEDDER="bedrock", AGENT_MEMORY_EMBEDDING_DIMENSIONS=512)
    embedder = build_embedder(settings)
    assert isinstance(embedder, TitanEmbedder) and embedder.name == "bedrock:amazon.titan-embed-text-v2:0:512"
    vectors = await embedder.embed(TEXTS)
    calls = bedrock_stub.invocations
    assert {c.model_id for c in calls} == {"amazon.titan-embed-text-v2:0"}
    assert sorted(c.body["inputText"] for c in calls) == sorted(TEXTS)
    assert all(c.body["dimensions"] == 512 and c.body["normalize"] is True for c in calls)
    assert [v.shape for v in vectors] == [(512,)] * 3
    similar, different = _close(vectors)  # each vector is its own text's, in order
    assert similar > different


async def test_the_hashing_embedder_is_deterministic_and_knows_word_forms() -> None:
    embedder = build_embedder(make_settings())
    assert isinstance(embedder, HashingEmbedder) and embedder.dimensions == 1024
    first, again = await embedder.embed([TEXTS[0]]), await embedder.embed([TEXTS[0]])
    assert np.array_equal(first[0], again[0])
    similar, different = _close(await embedder.embed(TEXTS))
    assert similar > 0.3 > different
    assert not hash_vector("hello, how are you?", 1024).any()  # only stop words: no features at all


@pytest.mark.parametrize("provider", ["openai", "bedrock"])
async def test_memory_search_runs_on_a_providers_vectors(
    provider: str, openai_stub: OpenAiStub, bedrock_stub: BedrockStub
) -> None:
    settings = make_settings(
        AGENT_MEMORY_EMBEDDER=provider, OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="sk-test"
    )
    context = build_context(settings, table=MemoryTable(), audit=lambda line: None)
    transport = httpx.ASGITransport(app=build_app(*routes.local, context=context))
    body = {
        "messages": [
            {"role": "user", "content": text, "createdAt": f"2024-03-0{i + 1}T10:00:00Z"}
            for i, text in enumerate(TEXTS)
        ]
    }
    async with httpx.AsyncClient(transport=transport, base_url="http://local", headers={"X-User-Id": "a"}) as c:
        assert (await c.post("/api/ap/chats/import", json=body)).status_code == 201
        await context.background.join()
        await context.background.join()
        found = (await c.post("/api/ap/memory/search", json={"query": "Patagonia hiking"})).json()
    assert found["records"] and "Patagonia" in found["records"][0]["text"]
    assert context.deps.memory is not None
    stored = await context.deps.memory.records.load("a")
    assert {s.embedder for s in stored} == {context.deps.memory.embedder.name}
    wire = openai_stub.embedding_requests if provider == "openai" else bedrock_stub.invocations
    assert wire  # the provider was asked, not the offline default
