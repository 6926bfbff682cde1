"""BM25 over one user's records, in process (numpy): postings per term, Okapi BM25 (k1 1.2, b 0.75)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from agent_core.memory.terms import terms

K1 = 1.2
B = 0.75


class Bm25Index:
    """Built once per version of a user's records; `scores` costs one pass over the query terms' postings."""

    def __init__(self, texts: list[str]) -> None:
        self.size = len(texts)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        lengths = np.zeros(self.size, dtype=np.float32)
        for doc, text in enumerate(texts):
            counts = Counter(terms(text))
            lengths[doc] = float(sum(counts.values()))
            for term, tf in counts.items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(doc)
                tfs.append(tf)
        average = float(lengths.mean()) if self.size else 0.0
        norm: np.ndarray = K1 * (1 - B + B * lengths / average) if average else np.full(self.size, K1, dtype=np.float32)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (docs, tfs) in postings.items():
            d = np.asarray(docs, dtype=np.int32)
            freq = np.asarray(tfs, dtype=np.float32)
            idf = math.log(1 + (self.size - len(docs) + 0.5) / (len(docs) + 0.5))
            self._postings[term] = (d, (idf * freq * (K1 + 1) / (freq + norm[d])).astype(np.float32))

    def scores(self, query: str, ignore: frozenset[str] = frozenset()) -> np.ndarray:
        """Each record's BM25 score for the query's content terms (zeros where none matches), `ignore`d left out."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in set(terms(query)) - ignore:
            hit = self._postings.get(term)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out
