"""Hybrid retrieval over one user's records: BM25 and vector similarity fused by reciprocal rank, a time
filter, a small recency prior, and a token budget.

`UserIndex` is what a search needs of a user's records (their texts' BM25 postings, their vectors as one
float32 matrix, their times); the record store builds it once per version of the user's records and keeps it
in process, so a search is one query embedding plus a few numpy passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent_core.llm.tokens import estimate_text
from agent_core.memory.embedding import Vector
from agent_core.memory.lexical import Bm25Index
from agent_core.memory.records import MemoryRecord, RecordKind
from agent_core.memory.terms import SMALL_TALK

RRF_K = 10  # reciprocal-rank fusion's constant: 1 / (k + rank) per ranking
CANDIDATES = 200  # each ranking contributes its best this many
VECTOR_WEIGHT = 0.5
LEXICAL_WEIGHT = 1.0
SUMMARY_WEIGHT = 0.25  # a summary (long, and covering exchanges that are records too) ranks at a quarter
VECTOR_ONLY_MIN = 0.1  # the least cosine of a record found by its vector alone
RECENCY_WEIGHT = 0.05  # at most this share of a record's score comes from being recent (a tie-breaker)


@dataclass
class UserIndex:
    """One version of a user's records, ready to search."""

    records: list[MemoryRecord]
    matrix: np.ndarray  # (records, dimensions) float32, rows L2-normalised
    lexical: Bm25Index
    ats: np.ndarray  # int64 epoch ms
    summaries: np.ndarray  # bool: the record is a summary or a fact (not a message window)

    @staticmethod
    def build(records: list[MemoryRecord], vectors: list[Vector], dimensions: int) -> UserIndex:
        matrix = np.vstack(vectors).astype(np.float32) if vectors else np.zeros((0, dimensions), dtype=np.float32)
        ats = np.asarray([r.at for r in records], dtype=np.int64)
        summaries = np.asarray([r.kind != RecordKind.MESSAGE for r in records], dtype=bool)
        return UserIndex(records, matrix, Bm25Index([r.text for r in records]), ats, summaries)


@dataclass(frozen=True)
class Hit:
    record: MemoryRecord
    score: float
    similarity: float  # cosine of the query and the record
    lexical: float  # BM25 score (0: no content word in common)
    tokens: int


@dataclass(frozen=True)
class SearchQuery:
    text: str
    limit: int = 20
    max_tokens: int | None = None
    start: int | None = None  # epoch ms, inclusive
    end: int | None = None  # epoch ms, exclusive
    min_similarity: float | None = None  # the relevance floor: a common word (not small talk) and this cosine


def _ranks(scores: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """1-based rank of each eligible record by score (best first), among the best CANDIDATES; 0 elsewhere."""
    ranks = np.zeros(scores.shape[0], dtype=np.int32)
    idx = np.flatnonzero(eligible)
    if idx.size == 0:
        return ranks
    take = min(CANDIDATES, idx.size)
    part = idx[np.argpartition(-scores[idx], take - 1)[:take]] if take < idx.size else idx
    ordered = part[np.argsort(-scores[part], kind="stable")]
    ranks[ordered] = np.arange(1, ordered.size + 1, dtype=np.int32)
    return ranks


def search(index: UserIndex, query: SearchQuery, vector: Vector) -> tuple[list[Hit], int]:
    """The best records for the query, best first, within `limit` and `max_tokens` (they stop before the budget
    is exceeded); and their token estimate. Records outside [start, end) are never returned."""
    n = len(index.records)
    if n == 0:
        return [], 0
    window = np.ones(n, dtype=bool)
    if query.start is not None:
        window &= index.ats >= query.start
    if query.end is not None:
        window &= index.ats < query.end
    lexical = index.lexical.scores(query.text)
    # einsum, not `@`: a matrix-vector product gains nothing from BLAS threads, and on a busy machine with few
    # cores their hand-offs cost more than the product itself (tens of ms against ~1 ms).
    same_space = index.matrix.shape[1] == vector.shape[0]
    similarity = np.einsum("ij,j->i", index.matrix, vector.astype(np.float32)) if same_space else None
    if similarity is None:
        similarity = np.zeros(n, dtype=np.float32)
    # A record with no word in common needs a cosine above chance (hashing collisions give small ones).
    eligible = window & ((lexical > 0) | (similarity >= VECTOR_ONLY_MIN))
    if query.min_similarity is not None:
        # The relevance floor: a word in common beyond small talk, and vectors at least this close.
        topical = index.lexical.scores(query.text, ignore=SMALL_TALK) > 0
        eligible &= topical & (similarity >= query.min_similarity)
    lex_rank = _ranks(lexical, eligible & (lexical > 0))
    vec_rank = _ranks(similarity, eligible & (similarity >= VECTOR_ONLY_MIN))
    fused = np.zeros(n, dtype=np.float64)
    fused += np.where(lex_rank > 0, LEXICAL_WEIGHT / (RRF_K + lex_rank), 0.0)
    fused += np.where(vec_rank > 0, VECTOR_WEIGHT / (RRF_K + vec_rank), 0.0)
    if n > 1 and RECENCY_WEIGHT:
        span = max(int(index.ats.max() - index.ats.min()), 1)
        fused *= 1.0 + RECENCY_WEIGHT * (index.ats - index.ats.min()) / span
    fused = np.where(index.summaries, fused * SUMMARY_WEIGHT, fused)
    positive = np.flatnonzero(fused > 0)
    order = [int(i) for i in positive[np.argsort(-fused[positive], kind="stable")]]
    hits: list[Hit] = []
    total = 0
    cited: set[str] = set()
    for i in order:
        if len(hits) >= query.limit:
            break
        record = index.records[i]
        if record.message_ids and cited.issuperset(record.message_ids):
            continue  # every message it cites is in a better record already (overlapping windows)
        cited.update(record.message_ids)
        tokens = estimate_text(record.text)
        if query.max_tokens is not None and total + tokens > query.max_tokens:
            break
        total += tokens
        hits.append(Hit(record, float(fused[i]), float(similarity[i]), float(lexical[i]), tokens))
    return hits, total
