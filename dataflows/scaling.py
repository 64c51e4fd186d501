"""Generated libraries of many small books, for the scaling bench and the resource tests.

``small_books`` cuts the shared plain-text books (Project Gutenberg boilerplate removed) into ``n``
consecutive pieces of about ``words`` words each (fewer when the texts run short), each a book of one
chapter. ``generated_library`` commits them straight into a library's indexes in batches, one chunk
per book and windows of about 90 words, embedded by the given encoder or, without one, by
deterministic pseudo-random unit vectors (resource tests: the files and code paths are real, the
meanings are not). ``folio ingest`` of the same books' files (``write_book_files``) gives the same
kind of library through the real ingest DAG, at the cost of parsing and embedding each.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from folio.dataflows.library import Library, shared_index
from folio.nodes.backends.library_index import StagedRows, VectorSettings
from folio.nodes.lexical import _write_store
from folio.nodes.types import Chapter, Chunk, Manifest, Window

WINDOW_WORDS = 90
_START = re.compile(r"\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG[^\n]*\n")
_END = re.compile(r"\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG")


@dataclass(frozen=True)
class SmallBook:
    title: str
    text: str


def _body(text: str) -> str:
    start = _START.search(text)
    end = _END.search(text)
    return text[start.end() if start else 0 : end.start() if end else len(text)]


def small_books(data_dir: Path, n: int, words: int = 400) -> list[SmallBook]:
    """``n`` books of about ``words`` words cut in order from ``data_dir/books/txt/*.txt``."""
    tokens: list[str] = []
    for path in sorted((data_dir / "books" / "txt").glob("*.txt")):
        tokens.extend(_body(path.read_text(encoding="utf-8")).split())
    size = max(20, min(words, len(tokens) // max(n, 1)))
    return [SmallBook(f"Piece {i + 1:04d}", " ".join(tokens[i * size : (i + 1) * size])) for i in range(n)]


def write_book_files(books: Sequence[SmallBook], directory: Path) -> list[Path]:
    """The books as plain-text files (a title line, then the text) for ``folio ingest``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for book in books:
        path = directory / f"{book.title.lower().replace(' ', '-')}.txt"
        path.write_text(f"{book.title}\n\n{book.text}\n", encoding="utf-8")
        out.append(path)
    return out


def _hashed_vectors(texts: Sequence[str], ndim: int = 384) -> np.ndarray:
    """Deterministic pseudo-random unit vectors, one per text (no model)."""
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(ndim).astype(np.float32)
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows) if rows else np.zeros((0, ndim), dtype=np.float32)


def _staged(book: SmallBook, directory: Path, model: str) -> tuple[StagedRows, list[str]]:
    """One small book staged as the ingest DAG stages it: one chapter, one chunk, ~90-word windows."""
    digest = hashlib.sha1(book.text.encode()).hexdigest()
    book_id = f"{book.title.lower().replace(' ', '-')}-{digest[:8]}"
    chapter = Chapter(chapter_id=f"ch-{digest[:10]}", order=0, title=book.title, text=book.text)
    n_tokens = len(book.text.split())
    chunk = Chunk(
        chunk_id=f"{chapter.chapter_id}.000",
        chapter_id=chapter.chapter_id,
        ordinal=0,
        start=0,
        end=len(book.text),
        n_tokens=n_tokens,
        text=book.text,
    )
    spans = [m.span() for m in re.finditer(r"\S+", book.text)]
    windows: list[Window] = []
    texts: list[str] = []
    for i in range(0, max(len(spans), 1), WINDOW_WORDS):
        part = spans[i : i + WINDOW_WORDS] or [(0, len(book.text))]
        start, end = part[0][0], part[-1][1]
        texts.append(book.text[start:end])
        windows.append(Window(len(windows), chunk.chunk_id, start, end, texts[-1]))
    manifest = Manifest(
        book_id=book_id,
        title=book.title,
        author="Generated",
        language="en",
        source_file=f"{book_id}.txt",
        format="txt",
        content_hash=digest,
        chapters=(chapter,),
    )
    directory.mkdir(parents=True)
    _write_store(directory / "book.sqlite", manifest, (chunk,), tuple(windows))
    descriptor: dict[str, Any] = {
        "format_version": 1,
        "book_id": book_id,
        "title": book.title,
        "author": "Generated",
        "language": "en",
        "source_file": manifest.source_file,
        "format": "txt",
        "content_hash": digest,
        "embedding_model": model,
        "chunk_tokens": 800,
        "chunk_overlap": 0.1,
        "n_chunks": 1,
        "n_windows": len(windows),
        "chapters": [
            {
                "chapter_id": chapter.chapter_id,
                "order": 0,
                "title": book.title,
                "length": len(book.text),
                "n_chunks": 1,
            }
        ],
    }
    (directory / "book.json").write_text(json.dumps(descriptor), encoding="utf-8")
    return StagedRows(book_id, str(directory), descriptor, None), texts


def generated_library(
    path: Path, books: Sequence[SmallBook], encoder: Any = None, batch: int = 200, dtype: str = "i8"
) -> Library:
    """A library of ``books`` committed in batches (vectors from ``encoder``, else hashed)."""
    lib = Library(path)
    model = encoder.model_id if encoder is not None else "generated"
    with lib.writer():
        index = shared_index(lib.path)
        for start in range(0, len(books), batch):
            work = lib.new_staging_dir("generated")
            staged = []
            for i, book in enumerate(books[start : start + batch]):
                rows, texts = _staged(book, work / str(i), model)
                vectors = encoder.encode(texts) if encoder is not None else _hashed_vectors(texts)
                np.save(Path(rows.directory) / "vectors.npy", np.asarray(vectors, dtype=np.float32))
                staged.append(rows)
            index.commit(add=staged, settings=VectorSettings(dtype=dtype))
            shutil.rmtree(work, ignore_errors=True)
        lib.sync_catalog()
    return lib
