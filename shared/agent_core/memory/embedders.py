"""The Embedder port's provider adapters: the configured OpenAI-compatible endpoint's `/v1/embeddings`, and
Amazon Bedrock's Titan Text Embeddings v2 (`InvokeModel`). Each imports its SDK only when chosen."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_core.config import Settings
from agent_core.errors import LlmUnavailable
from agent_core.memory.embedding import Vector, normalised

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
TITAN_DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
_BATCH = 256  # texts per /v1/embeddings request
_PARALLEL = 8  # Titan embeds one text per InvokeModel: this many at a time


class OpenAiEmbedder:
    """`POST /v1/embeddings` on the configured endpoint (OpenAI, Azure or any compatible server), with the
    same key, timeout and retries as the model calls; `dimensions` is sent so vectors stay compact."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        from agent_core.llm.openai_client import OpenAiLlmClient

        self.model = settings.memory_embedding_model or OPENAI_DEFAULT_MODEL
        self.dimensions = settings.memory_embedding_dimensions
        self.name = f"openai:{self.model}:{self.dimensions}"
        self._llm = OpenAiLlmClient(settings, client)

    async def embed(self, texts: list[str]) -> list[Vector]:
        client = await self._llm.sdk_client()
        out: list[Vector] = []
        for start in range(0, len(texts), _BATCH):
            batch = texts[start : start + _BATCH]
            try:
                answer = await client.embeddings.create(model=self.model, input=batch, dimensions=self.dimensions)
            except Exception as exc:
                raise LlmUnavailable(f"embeddings failed: {type(exc).__name__}") from exc
            ordered = sorted(answer.data, key=lambda d: d.index)
            out.extend(normalised(list(d.embedding)) for d in ordered)
        return out


class TitanEmbedder:
    """Titan Text Embeddings v2 through `bedrock-runtime` `InvokeModel` (256, 512 or 1024 dimensions)."""

    def __init__(self, settings: Settings, client_factory: Any = None) -> None:
        from agent_core.llm.bedrock_client import make_bedrock_client

        self.model = settings.memory_embedding_model or TITAN_DEFAULT_MODEL
        self.dimensions = settings.memory_embedding_dimensions
        self.name = f"bedrock:{self.model}:{self.dimensions}"
        self._factory = client_factory or (lambda: make_bedrock_client(settings))
        self._client: Any = None

    def _invoke(self, text: str) -> list[float]:
        if self._client is None:
            self._client = self._factory()
        body = json.dumps({"inputText": text, "dimensions": self.dimensions, "normalize": True})
        answer = self._client.invoke_model(
            modelId=self.model, body=body, contentType="application/json", accept="application/json"
        )
        return list(json.loads(answer["body"].read())["embedding"])

    async def embed(self, texts: list[str]) -> list[Vector]:
        gate = asyncio.Semaphore(_PARALLEL)

        async def one(text: str) -> Vector:
            async with gate:
                try:
                    return normalised(await asyncio.to_thread(self._invoke, text))
                except Exception as exc:
                    raise LlmUnavailable(f"embeddings failed: {type(exc).__name__}") from exc

        return list(await asyncio.gather(*(one(t) for t in texts)))
