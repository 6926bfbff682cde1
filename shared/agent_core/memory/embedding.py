"""The Embedder port and its offline adapter: deterministic feature hashing (no weights, no network).

The hashing embedder maps a text's word unigrams, word bigrams and character 3-5-grams of its words into
`dimensions` signed buckets (CRC-32 of the feature: bucket and sign), weighs them sub-linearly and L2-normalises
the result, so the dot product of two vectors is their cosine similarity. It knows no synonyms: it finds the
same words and spellings close to them ("hike"/"hiking", typos, compounds), which is what the lexical ranking
misses; a provider's embedding model (`openai`, `bedrock`) adds meaning.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from typing import Protocol

import numpy as np

from agent_core.memory.terms import STOP_WORDS, stem, words

Vector = np.ndarray  # float32, L2-normalised, shape (dimensions,)


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of one fixed size. `name` identifies the vector space
    (provider, model and size): vectors of another name are never compared with this one's."""

    name: str
    dimensions: int

    async def embed(self, texts: list[str]) -> list[Vector]: ...


_UNIGRAM, _BIGRAM, _CHARGRAM = 1.0, 0.6, 0.25


def _features(text: str) -> Counter[str]:
    feats: Counter[str] = Counter()
    content = [stem(w) for w in words(text) if w not in STOP_WORDS]
    for word in content:
        feats["w:" + word] += 1
        padded = f"<{word}>"
        for n in (3, 4, 5):
            for i in range(max(0, len(padded) - n + 1)):
                feats["c:" + padded[i : i + n]] += 1
    for first, second in itertools.pairwise(content):
        feats[f"b:{first} {second}"] += 1
    return feats


def _weight(feature: str) -> float:
    return _UNIGRAM if feature[0] == "w" else _BIGRAM if feature[0] == "b" else _CHARGRAM


def hash_vector(text: str, dimensions: int) -> Vector:
    """The text's hashed feature vector (zeros for a text with no content words)."""
    buckets: dict[int, float] = {}
    for feature, count in _features(text).items():
        digest = zlib.crc32(feature.encode("utf-8"))
        value = _weight(feature) * (1.0 + math.log(count))
        index = digest % dimensions
        buckets[index] = buckets.get(index, 0.0) + (value if digest & 0x80000000 else -value)
    vector = np.zeros(dimensions, dtype=np.float32)
    if buckets:
        vector[np.fromiter(buckets.keys(), dtype=np.int64)] = np.fromiter(buckets.values(), dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class HashingEmbedder:
    """The offline default: no model weights, no network, the same vector for the same text in every process."""

    def __init__(self, dimensions: int = 1024) -> None:
        self.dimensions = dimensions
        self.name = f"hashing-v1-{dimensions}"

    async def embed(self, texts: list[str]) -> list[Vector]:
        return [hash_vector(t, self.dimensions) for t in texts]


def normalised(values: list[float]) -> Vector:
    """A provider's vector as float32, L2-normalised."""
    vector = np.asarray(values, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
