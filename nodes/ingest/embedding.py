"""Embedding: window vectors (with a per-window cache) and chunk vectors, from the ``encoder`` node.

The encoder itself is the node of ``nodes.search.encoding`` (shared with the search DAG).
Config keys: ``embedding_batch_size``.
Vectors are L2-normalised float32. A chunk's vector is the normalised mean of its windows' vectors
(used for concept-map centroids); search uses the window vectors and maps hits back to chunks.
Limitations: CPU only here; the encoder is loaded once per process and shared by every book.
"""

from __future__ import annotations

import numpy as np

from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.encoder import Encoder, unit_means
from folio.nodes.backends.progress import Progress
from folio.nodes.core.types import Chunk, Window


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def window_vectors(
    windows: tuple[Window, ...],
    encoder: Encoder,
    embedding_cache: EmbeddingCache,
    progress: Progress,
    embedding_batch_size: int = 32,
) -> np.ndarray:
    """One normalised vector per window (row ``i`` = ``windows[i]``); cached windows are not re-encoded.

    Progress is reported in chunks: each window counts as its share of its chunk.
    """
    texts = [w.text for w in windows]
    share = _chunk_shares(windows)
    cached = embedding_cache.get_many(encoder.embedder_id, texts, encoder.dimension)
    missing = [i for i, vec in enumerate(cached) if vec is None]
    progress.add_total(round(sum(share)))
    progress.advance(sum(share[i] for i, vec in enumerate(cached) if vec is not None))
    out = np.zeros((len(windows), encoder.dimension), dtype=np.float32)
    for i, vec in enumerate(cached):
        if vec is not None:
            out[i] = vec
    if missing:
        fresh = encoder.encode(
            [texts[i] for i in missing],
            embedding_batch_size,
            lambda batch: progress.advance(sum(share[missing[j]] for j in batch)),
        )
        out[missing] = fresh
        embedding_cache.set_many(encoder.embedder_id, [texts[i] for i in missing], fresh)
    return _readonly(out)


def _chunk_shares(windows: tuple[Window, ...]) -> list[float]:
    """Each window's share of its chunk (1 / windows in that chunk), for progress in chunks."""
    per_chunk: dict[str, int] = {}
    for w in windows:
        per_chunk[w.chunk_id] = per_chunk.get(w.chunk_id, 0) + 1
    return [1.0 / per_chunk[w.chunk_id] for w in windows]


def chunk_vectors(
    window_vectors: np.ndarray, windows: tuple[Window, ...], chunks: tuple[Chunk, ...]
) -> np.ndarray:
    """One normalised vector per chunk (row ``i`` = ``chunks[i]``): the mean of its windows."""
    position = {c.chunk_id: i for i, c in enumerate(chunks)}
    index = np.fromiter((position[w.chunk_id] for w in windows), dtype=np.int64, count=len(windows))
    return _readonly(unit_means(window_vectors, index, len(chunks)))
