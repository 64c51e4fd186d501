"""Plain retrieval baselines over a book store's chunks, for experiments against Folio's own search.

Two per-book indexes over exactly the chunks that Folio searches (the book's rows of the library index):

* ``Bm25Index``: BM25 as computed by the ``bm25s`` library (optional dependency ``folio[baselines]``):
  ``bm25s.tokenize(texts, stopwords="en")`` (lower-cased ``\\w\\w+`` tokens, English stopwords, no
  stemmer), default parameters (``method="lucene"``, k1 = 1.5, b = 0.75). No FTS5 query building:
  the query is tokenised like the chunks and every known term counts.
* ``DenseIndex``: one vector per chunk, the L2-normalised mean of its window vectors (the stored
  float32 vectors, mapped to chunks by the ``windows`` table), scored by an exact matrix product
  (cosine, no HNSW, no per-window max).

Built indexes are kept per process, keyed by kind, book id, the book's content hash, its library directory and
its chunking/model settings (``cache_key``), so repeated queries never rebuild; ``clear_cache`` drops them.

Limitations: indexes live in memory only (built on the first query of each book, never persisted);
scores of different books are merged as they are (per-book IDF for bm25s); a chunk's mean vector
dilutes a passage that only one of its windows matches; building holds one process-wide lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from folio.nodes.backends.book_store import BookStore
from folio.nodes.backends.encoder import unit_means
from folio.nodes.core.types import FolioError, Hit

BM25S_INSTALL = "the bm25s baseline needs bm25s: pip install 'folio[baselines]'"

T = TypeVar("T")

_CACHE: dict[tuple[str, ...], Any] = {}
_CACHE_LOCK = threading.Lock()


def require_bm25s() -> Any:
    """The ``bm25s`` module, or a one-line FolioError naming the install command."""
    try:
        import bm25s
    except ImportError:
        raise FolioError("search_mode", BM25S_INSTALL) from None
    return bm25s


# --- pure helpers ------------------------------------------------------------------------------
def chunk_mean_vectors(
    window_vectors: np.ndarray, window_chunk_rowids: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(chunk_rowids, matrix)``: the sorted distinct chunk rowids and, per chunk, the L2-normalised
    mean of its windows' vectors (a zero mean stays zero)."""
    vectors = np.asarray(window_vectors, dtype=np.float32)
    owners = np.asarray(window_chunk_rowids, dtype=np.int64)
    if vectors.ndim != 2 or len(vectors) != len(owners):
        raise ValueError(f"{len(owners)} window owners for window vectors of shape {vectors.shape}")
    chunk_rowids, inverse = np.unique(owners, return_inverse=True)
    return chunk_rowids, unit_means(vectors, inverse, len(chunk_rowids))


def top_positions(
    scores: np.ndarray, k: int, mask: np.ndarray | None = None, min_score: float | None = None
) -> list[tuple[int, float]]:
    """``(position, score)`` of the ``k`` best scores (ties by position), among ``mask`` and above
    ``min_score``."""
    keep = np.ones(len(scores), dtype=bool) if mask is None else np.asarray(mask, dtype=bool).copy()
    if min_score is not None:
        keep &= scores > min_score
    positions = np.flatnonzero(keep)
    if k <= 0 or len(positions) == 0:
        return []
    order = positions[np.lexsort((positions, -scores[positions]))][:k]
    return [(int(p), float(scores[p])) for p in order]


class Bm25Index:
    """BM25 (bm25s, lucene defaults) over ``texts``; positions are indexes into ``texts``."""

    def __init__(self, texts: Sequence[str]) -> None:
        bm25s = require_bm25s()
        self._bm25s = bm25s
        self.size = len(texts)
        self._retriever: Any = None
        if self.size:
            tokens = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
            self._retriever = bm25s.BM25()
            self._retriever.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return self.size

    def query_terms(self, query: str) -> list[str]:
        """The query's tokens that occur in the indexed texts (stopwords and unknown words dropped)."""
        if self._retriever is None:
            return []
        (tokens,) = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        return [t for t in tokens if t and t in self._retriever.vocab_dict]

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every text (all zero when no query term is indexed)."""
        terms = self.query_terms(query)
        if not terms:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(terms), dtype=np.float32)

    def top(self, query: str, k: int, mask: np.ndarray | None = None) -> list[tuple[int, float]]:
        """``(position, score)`` of the ``k`` best texts matching at least one query term."""
        return top_positions(self.scores(query), k, mask, min_score=0.0)


@dataclass(frozen=True)
class BookChunks:
    """A book's chunks in index order (scores 0) and their chapter ids, for chapter masks."""

    hits: tuple[Hit, ...]
    chapters: np.ndarray

    @classmethod
    def of(cls, hits: Sequence[Hit]) -> BookChunks:
        return cls(tuple(hits), np.array([h.chapter_id for h in hits], dtype=object))

    def mask(self, chapter_ids: Collection[str] | None) -> np.ndarray | None:
        """Which chunks are in ``chapter_ids`` (None = all of them)."""
        if chapter_ids is None:
            return None
        return np.isin(self.chapters, list(chapter_ids))

    def ranked(self, top: Sequence[tuple[int, float]]) -> list[Hit]:
        return [replace(self.hits[p], score=s) for p, s in top]


@dataclass(frozen=True)
class Bm25Book:
    chunks: BookChunks
    index: Bm25Index


@dataclass(frozen=True)
class DenseBook:
    chunks: BookChunks
    matrix: np.ndarray  # one L2-normalised row per chunk in ``chunks``


# --- per-book builders -------------------------------------------------------------------------
def build_bm25_book(store: BookStore) -> Bm25Book:
    """bm25s over every chunk of the store, in reading order."""
    hits = store.chunks_in(None)
    return Bm25Book(BookChunks.of(hits), Bm25Index([h.text for h in hits]))


def build_dense_book(store: BookStore) -> DenseBook:
    """One mean window vector per chunk of the store (chunks without windows are left out)."""
    owners, vectors = store.window_vectors()
    if not owners:
        return DenseBook(BookChunks.of([]), np.zeros((0, 0), dtype=np.float32))
    by_id = {h.chunk_id: h for h in store.chunks_in(None)}
    ordinal = {chunk_id: i for i, chunk_id in enumerate(by_id)}
    rowids, matrix = chunk_mean_vectors(vectors, np.array([ordinal[c] for c in owners], dtype=np.int64))
    order = list(by_id)
    return DenseBook(BookChunks.of([by_id[order[int(r)]] for r in rowids]), matrix)


# --- process cache -----------------------------------------------------------------------------
def cache_key(kind: str, store: BookStore) -> tuple[str, ...]:
    """Kind, book id, content hash, library directory, and the chunking/model settings the chunks came
    from."""
    d = store.descriptor
    settings = (d.get("embedding_model"), d.get("chunk_tokens"), d.get("chunk_overlap"))
    return (kind, store.book_id, str(d.get("content_hash")), str(store.index.directory), repr(settings))


def _cached(kind: str, store: BookStore, build: Callable[[BookStore], T]) -> T:
    key = cache_key(kind, store)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = build(store)
        return _CACHE[key]


def cached_keys() -> list[tuple[str, ...]]:
    """The keys of the indexes built in this process."""
    with _CACHE_LOCK:
        return list(_CACHE)


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def bm25_book(store: BookStore) -> Bm25Book:
    """The store's cached bm25s index (built on first use)."""
    return _cached("bm25s", store, build_bm25_book)


def dense_book(store: BookStore) -> DenseBook:
    """The store's cached chunk mean-vector matrix (built on first use)."""
    return _cached("dense_exact", store, build_dense_book)


# --- queries -----------------------------------------------------------------------------------
def bm25_hits(store: BookStore, query: str, k: int, chapter_ids: Collection[str] | None = None) -> list[Hit]:
    """The store's ``k`` best chunks by bm25s score (chunks sharing no query term are left out)."""
    book = bm25_book(store)
    return book.chunks.ranked(book.index.top(query, k, book.chunks.mask(chapter_ids)))


def dense_hits(
    store: BookStore, query_vector: np.ndarray, k: int, chapter_ids: Collection[str] | None = None
) -> list[Hit]:
    """The store's ``k`` best chunks by exact cosine between the query and each chunk's mean vector."""
    book = dense_book(store)
    if len(book.matrix) == 0:
        return []
    q = np.asarray(query_vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return []
    sims = np.clip((book.matrix @ (q / norm)).astype(np.float64), -1.0, 1.0)
    return book.chunks.ranked(top_positions(sims, k, book.chunks.mask(chapter_ids)))
