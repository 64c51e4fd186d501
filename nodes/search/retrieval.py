"""Retrieval over ingested books: lexical (FTS5 bm25), semantic (usearch) and hybrid search.

Hybrid fusion is a *convex combination of normalised scores* (Bruch et al., 2023, "An Analysis of
Fusion Functions for Hybrid Retrieval"): each list's scores are divided by the list's best score
(bm25 and cosine both become "fraction of the best match"; a chunk missing from a list scores 0
there) and combined as ``w * lexical + (1 - w) * semantic`` with ``w = hybrid_lexical_weight``
(default 0.7). Unlike reciprocal rank fusion it keeps *how much* better the top lexical hit is than
the next one: on FairytaleQA equal-weight RRF loses bm25's top-1 (0.592 vs 0.701 here), while the
convex combination beats bm25 at ranks 1 and 5 and in MRR (see README for the measured table).
Weighted RRF stays available as ``hybrid_fusion: rrf``.

Two plain baselines for experiments search the same chunks (``nodes/backends/baselines.py``):
``bm25s`` is BM25 computed by the ``bm25s`` library (``folio[baselines]``) without Folio's FTS5 query
building, and needs no encoder; ``dense_exact`` scores one mean vector per chunk by exact cosine (no
HNSW, no per-window max). Their per-book indexes are built on first use and kept per process.

Config keys: ``search_mode`` (lexical | semantic | hybrid | bm25s | dense_exact), ``hybrid_fusion``
(convex | rrf), ``hybrid_lexical_weight``, ``hybrid_rrf_k``, ``search_k``.
Inputs: ``query``, ``book_stores`` (opened by the caller), ``chapter_ids`` (None = whole books).
In hybrid mode a large library's lexical lookup (``lexical_search``) runs on a thread of its own while
the query is encoded on the other core (``query_vector__beside``; measured in docs/scaling-fullsize.md);
the hybrid nodes name ``semantic_hits`` first so Hamilton's depth-first walk encodes before it waits.
Lexical and semantic search make one lookup per library (``book_store.scopes``), whatever the number
of books: term statistics are library-wide. Depth, merge tie-break and fusion are the shared helpers of
``nodes/core/ranking.py`` (``ranked_lexical``, ``ranked_semantic``, ``HitFusion``), which the ask book flow
and
the book tools (agent, MCP) run too: one retrieval path. Limitations: the two baselines stay per book.
"""

from __future__ import annotations

import numpy as np
from hamilton.function_modifiers import config

from folio.nodes.backends import baselines
from folio.nodes.backends.encoder import Encoder
from folio.nodes.core.ranking import (
    HitFusion,
    LexicalSearch,
    merge_ranked,
    ranked_semantic,
    search_text,
    started_lexical,
)
from folio.nodes.core.types import Hit


@config.when_not(search_mode="hybrid")
def query_vector__alone(query: str, encoder: Encoder) -> np.ndarray:
    """The query's normalised embedding (with the model's query prefix, if any) of ``search_text(query)``:
    the text the ask encodes for the same question."""
    return encoder.encode_query(search_text(query))


@config.when(search_mode="hybrid")
def query_vector__beside(query: str, encoder: Encoder, lexical_search: LexicalSearch) -> np.ndarray:
    """The query's embedding, as ``query_vector__alone``'s, encoded while ``lexical_search`` runs: on one
    torch thread when the lookup holds the other core (``LexicalSearch.encode_threads``)."""
    return encoder.encode_query(search_text(query), threads=lexical_search.encode_threads)


def lexical_search(
    query: str, book_stores: tuple, chapter_ids: tuple | None, search_k: int = 10
) -> LexicalSearch:
    """The bm25 lookup, one per library, started: on a large library on a thread of its own, so the query
    is encoded meanwhile (``ranking.started_lexical``); never cached."""
    return started_lexical(book_stores, query, search_k, chapter_ids)


def lexical_hits(lexical_search: LexicalSearch) -> tuple[Hit, ...]:
    """bm25-ranked chunks of the books (``search_depth`` deep)."""
    return lexical_search.hits()


def semantic_hits(
    query_vector: np.ndarray, book_stores: tuple, chapter_ids: tuple | None, search_k: int = 10
) -> tuple[Hit, ...]:
    """Cosine-ranked chunks of the books, one lookup per library."""
    return ranked_semantic(book_stores, query_vector, search_k, chapter_ids)


@config.when(search_mode="lexical")
def search_results__lexical(lexical_hits: tuple[Hit, ...], search_k: int = 10) -> tuple[Hit, ...]:
    """Top-k lexical hits."""
    return lexical_hits[:search_k]


@config.when(search_mode="semantic")
def search_results__semantic(semantic_hits: tuple[Hit, ...], search_k: int = 10) -> tuple[Hit, ...]:
    """Top-k semantic hits."""
    return semantic_hits[:search_k]


@config.when(search_mode="hybrid", hybrid_fusion="convex")
def search_results__hybrid(
    semantic_hits: tuple[Hit, ...],
    lexical_hits: tuple[Hit, ...],
    hybrid_lexical_weight: float = 0.7,
    search_k: int = 10,
) -> tuple[Hit, ...]:
    """Top-k of the convex combination of normalised lexical and semantic scores."""
    return HitFusion("convex", float(hybrid_lexical_weight))(lexical_hits, semantic_hits, search_k)


@config.when(search_mode="hybrid", hybrid_fusion="rrf")
def search_results__rrf(
    semantic_hits: tuple[Hit, ...],
    lexical_hits: tuple[Hit, ...],
    hybrid_lexical_weight: float = 0.7,
    hybrid_rrf_k: int = 60,
    search_k: int = 10,
) -> tuple[Hit, ...]:
    """Top-k of weighted reciprocal rank fusion."""
    fusion = HitFusion("rrf", float(hybrid_lexical_weight), int(hybrid_rrf_k))
    return fusion(lexical_hits, semantic_hits, search_k)


@config.when(search_mode="bm25s")
def search_results__bm25s(
    query: str, book_stores: tuple, chapter_ids: tuple | None, search_k: int = 10
) -> tuple[Hit, ...]:
    """Top-k chunks by plain BM25 (the bm25s library) over every store, merged; no encoder needed."""
    baselines.require_bm25s()
    return merge_ranked([baselines.bm25_hits(s, query, search_k, chapter_ids) for s in book_stores], search_k)


@config.when(search_mode="dense_exact")
def search_results__dense_exact(
    query_vector: np.ndarray, book_stores: tuple, chapter_ids: tuple | None, search_k: int = 10
) -> tuple[Hit, ...]:
    """Top-k chunks by exact cosine between the query and each chunk's mean window vector, merged."""
    return merge_ranked(
        [baselines.dense_hits(s, query_vector, search_k, chapter_ids) for s in book_stores], search_k
    )
