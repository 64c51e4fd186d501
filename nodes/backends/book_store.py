"""One book of the library, as the query nodes see it: a view on the library-wide index.

A ``BookStore`` holds the book's descriptor and answers the per-book questions (its chunks, a chapter's
text, a search within it) through ``LibraryIndex`` (``nodes.backends.library_index``), which holds every
book in one SQLite FTS5 index and one HNSW. Nodes that search several books group their stores with
``scopes`` and make one lookup per library, never one per book.

Limitations: a store is valid for the library generation it was read from; a replaced book gets a new
store from ``Library.store``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

import numpy as np

from folio.nodes.backends.library_index import LibraryIndex
from folio.nodes.core.types import Hit


class BookStore:
    """Queries over one book of a ``LibraryIndex``."""

    def __init__(self, index: LibraryIndex, descriptor: dict[str, Any]) -> None:
        self.index = index
        self.descriptor = descriptor
        self.book_id: str = descriptor["book_id"]
        self.titles = {c["chapter_id"]: c["title"] for c in descriptor["chapters"]}

    def lexical(self, query: str, k: int = 10, chapter_ids: Collection[str] | None = None) -> list[Hit]:
        """bm25-ranked chunks of the book (see ``LibraryIndex.lexical``)."""
        return self.index.lexical(query, k, (self.book_id,), chapter_ids)

    def semantic(
        self, query_vector: np.ndarray, k: int = 10, chapter_ids: Collection[str] | None = None
    ) -> list[Hit]:
        """Chunks of the book ranked by the cosine similarity of their best window to the query vector."""
        return self.index.semantic(query_vector, k, (self.book_id,), chapter_ids)

    def holds_phrase(self, text: str) -> bool:
        """Some chunk holds the words of ``text`` in this order (FTS5 phrase; case, accents, punctuation
        and possessive apostrophes ignored); ``False`` for text without words."""
        return self.book_id in self.index.books_holding(text, (self.book_id,))

    def chunk(self, chunk_id: str) -> Hit:
        return self.index.chunk(self.book_id, chunk_id)

    def chunks_in(self, chapter_ids: Collection[str] | None = None) -> list[Hit]:
        """All chunks (of the given chapters), in reading order."""
        return self.index.chunks_in(self.book_id, chapter_ids)

    def first_holding(self, name: str) -> Hit | None:
        """The first chunk, in reading order, that holds ``name`` (its words in order, the first one
        capitalised as written: "Weena", "Mock Turtle" in "the Mock turtle"), None when none does."""
        name_words = name.split()
        if not name_words:
            return None
        rest = "".join(rf"\W+(?i:{re.escape(w)})" for w in name_words[1:])
        pattern = re.compile(rf"\b{re.escape(name_words[0])}{rest}\b")
        held = self.index.chunks_holding(name, self.book_id)  # the FTS5 phrase: the few that may
        return next((h for h in held if pattern.search(h.text)), None)

    def chapter_text(self, chapter_id: str) -> str:
        return self.index.chapter_text(self.book_id, chapter_id)

    def window_vectors(self) -> tuple[tuple[str, ...], np.ndarray]:
        """``(chunk id of each window, float32 vectors)`` in window order."""
        return self.index.window_vectors(self.book_id)


def scopes(stores: Iterable[Any]) -> list[tuple[LibraryIndex, tuple[str, ...] | None]]:
    """The stores grouped by library index: ``(index, book ids)``, the ids ``None`` when the stores are
    every book of that index (no filter), so a search of the whole library stays one plain lookup; a
    book whose descriptor is damaged is never searched (the others are, by their ids)."""
    stores = list(stores)
    indexes = {id(s.index): s.index for s in stores}  # most often one: the library's
    out: list[tuple[LibraryIndex, tuple[str, ...] | None]] = []
    for key, index in indexes.items():
        ids = (
            {s.book_id for s in stores}
            if len(indexes) == 1
            else {s.book_id for s in stores if id(s.index) == key}
        )
        out.append((index, None if ids >= index.book_id_set() else tuple(sorted(ids))))
    return out
