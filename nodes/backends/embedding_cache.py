"""Per-window embedding cache in diskcache, keyed by ``(model id, sha1 of the window text)``.

An edited book re-embeds only the windows whose text changed; adding a book embeds only that book.
The cache lives inside the library directory, so two libraries never share it. A damaged cache file
is a one-line ``FolioError`` naming the cache (``open_cache``); ``folio doctor`` clears it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.core.types import FolioError


def window_key(model_id: str, text: str) -> str:
    return f"emb:{model_id}:{hashlib.sha1(text.encode('utf-8')).hexdigest()}"


def damaged_cache(directory: str | Path, name: str, exc: Exception) -> FolioError:
    """The one-line error of a cache whose SQLite file cannot be read."""
    return FolioError(str(directory), f"damaged {name} ({exc}): run `folio doctor` (it clears the cache)")


def open_cache(directory: str | Path, name: str, size_limit: int = 2**30) -> Any:
    """A ``diskcache.Cache`` on ``directory``; a damaged one is a ``FolioError`` naming it (``name``)."""
    import sqlite3

    import diskcache

    try:
        return diskcache.Cache(str(directory), size_limit=size_limit)
    except sqlite3.DatabaseError as exc:
        raise damaged_cache(directory, name, exc) from None


class EmbeddingCache:
    """Vectors stored as float32 bytes; ``None`` directory means no caching."""

    def __init__(self, directory: str | Path | None) -> None:
        self._cache = None
        if directory is not None:
            self._cache = open_cache(directory, "embedding cache", size_limit=8 * 2**30)

    def get_many(self, model_id: str, texts: Sequence[str], dim: int) -> list[np.ndarray | None]:
        if self._cache is None:
            return [None] * len(texts)
        out: list[np.ndarray | None] = []
        for text in texts:
            raw = self._cache.get(window_key(model_id, text))
            out.append(None if raw is None else np.frombuffer(raw, dtype=np.float32, count=dim))
        return out

    def set_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        if self._cache is None:
            return
        with self._cache.transact():
            for text, vec in zip(texts, vectors, strict=True):
                self._cache.set(window_key(model_id, text), np.asarray(vec, dtype=np.float32).tobytes())

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
