"""Vector index: window vectors in a cosine HNSW index (usearch), plus a raw float32 copy.

Written into the staging directory as ``vectors.usearch`` (HNSW, keys = window ids) and
``vectors.npy`` (exact vectors, row = window id). Queries open the index memory-mapped
(``Index.restore(..., view=True)``); chapter-filtered queries score the filtered windows exactly from
the memory-mapped ``.npy``, which is faster and exact for the few hundred windows of a chapter set.

Config keys: ``hnsw_connectivity``, ``hnsw_expansion_add``, ``hnsw_expansion_search``.
Limitations: one index per book; library-wide semantic search merges per-book results.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from folio.nodes.types import IndexFile


def _write_index(directory: Path, vectors: np.ndarray, connectivity: int, expansion_add: int) -> None:
    from usearch.index import Index

    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "vectors.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    index = Index(
        ndim=vectors.shape[1],
        metric="cos",
        dtype="f32",
        connectivity=connectivity,
        expansion_add=expansion_add,
    )
    if len(vectors):
        index.add(np.arange(len(vectors), dtype=np.uint64), np.ascontiguousarray(vectors, dtype=np.float32))
    index.save(str(directory / "vectors.usearch"))


def vector_index(
    window_vectors: np.ndarray, staging_dir: str, hnsw_connectivity: int = 16, hnsw_expansion_add: int = 128
) -> IndexFile:
    """The usearch HNSW file (and exact vectors) of the book's windows, in the staging directory."""
    directory = Path(staging_dir)
    _write_index(directory, window_vectors, hnsw_connectivity, hnsw_expansion_add)
    return IndexFile(path=str(directory / "vectors.usearch"), count=len(window_vectors))
