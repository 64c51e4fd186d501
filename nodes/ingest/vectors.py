"""Vector index: the book's window vectors, staged for the library-wide HNSW (usearch).

Written into the staging directory as ``vectors.npy`` (float32, row = window id) and ``vectors.json``
(the HNSW settings). The library commit (``nodes.backends.library_index``) stores each vector with its
window and adds it to the library's one HNSW, which a search opens memory-mapped: cost does not grow
with the number of books. Candidates from the HNSW are re-scored exactly from the stored float32
vectors, so the index may hold them quantised (``vector_dtype``: f32, f16, i8; see README for the
measured memory and retrieval quality of each).

Config keys: ``hnsw_connectivity``, ``hnsw_expansion_add``, ``vector_dtype``.
Limitations: the settings are the library's, fixed by the first book with vectors; later books'
settings are ignored.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from folio.nodes.backends.library_index import DTYPES
from folio.nodes.core.types import FolioError, IndexFile


def _write_index(directory: Path, vectors: np.ndarray, settings: dict[str, object]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "vectors.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    (directory / "vectors.json").write_text(json.dumps(settings), encoding="utf-8")


def vector_index(
    window_vectors: np.ndarray,
    staging_dir: str,
    hnsw_connectivity: int = 16,
    hnsw_expansion_add: int = 128,
    vector_dtype: str = "i8",
) -> IndexFile:
    """The book's window vectors and the library HNSW's settings, in the staging directory."""
    if vector_dtype not in DTYPES:
        raise FolioError("vector_dtype", f"unknown scalar kind {vector_dtype!r}: use {', '.join(DTYPES)}")
    settings = {
        "connectivity": int(hnsw_connectivity),
        "expansion_add": int(hnsw_expansion_add),
        "dtype": vector_dtype,
    }
    directory = Path(staging_dir)
    _write_index(directory, window_vectors, settings)
    return IndexFile(path=str(directory / "vectors.npy"), count=len(window_vectors))
