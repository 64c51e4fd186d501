"""Per-window embedding cache in diskcache, keyed by ``(model id, sha1 of the window text)``.

An edited book re-embeds only the windows whose text changed; adding a book embeds only that book.
The cache lives inside the library directory, so two libraries never share it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def window_key(model_id: str, text: str) -> str:
    return f"emb:{model_id}:{hashlib.sha1(text.encode('utf-8')).hexdigest()}"


class EmbeddingCache:
    """Vectors stored as float32 bytes; ``None`` directory means no caching."""

    def __init__(self, directory: str | Path | None) -> None:
        self._cache = None
        if directory is not None:
            import diskcache

            self._cache = diskcache.Cache(str(directory), size_limit=8 * 2**30)

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
