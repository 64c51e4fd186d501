"""The library directory: layout, the DuckDB catalog, and the atomic swap of staged books.

Layout (the library directory is the only state; delete it and nothing else remains)::

    LIBRARY/
      catalog.duckdb            books, chapters, chunks (metadata only; rebuilt from the book directories)
      books/<book_id>/          book.json, book.sqlite (chunks + FTS5), vectors.usearch, vectors.npy,
                                concept_map.json
      staging/                  books being written; never read by queries
      trash/                    replaced books, removed once the swap is complete
      cache/                    embeddings and Hamilton results (diskcache)
      .lock                     writer lock (one ingest at a time per library)

Ingest writes a whole book into ``staging/`` and swaps it in with two renames; ``recover()`` (run by
every writer before it starts) restores a book left in ``trash/`` by a crash between the renames,
drops unfinished staging directories and re-syncs the catalog from the book directories, so a crash
or a bad file at any point leaves the library as it was before that book's ingest.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from folio.nodes.backends.book_store import BookStore
from folio.nodes.types import ConceptMap, FolioError, StagedBook

CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS books(
    book_id VARCHAR PRIMARY KEY, title VARCHAR, author VARCHAR, language VARCHAR, source_file VARCHAR,
    format VARCHAR, content_hash VARCHAR, embedding_model VARCHAR, chunk_tokens INTEGER,
    n_chapters INTEGER, n_chunks INTEGER, n_windows INTEGER, ingested_at TIMESTAMP DEFAULT current_timestamp);
CREATE TABLE IF NOT EXISTS chapters(
    book_id VARCHAR, chapter_id VARCHAR, ord INTEGER, title VARCHAR, length INTEGER, n_chunks INTEGER);
CREATE TABLE IF NOT EXISTS chunks(
    book_id VARCHAR, chunk_id VARCHAR, chapter_id VARCHAR, ordinal INTEGER, start INTEGER, "end" INTEGER,
    n_tokens INTEGER);
"""


def _chunk_rows(directory: Path, book_id: str) -> list[list[object]]:
    """Chunk metadata (no text) of one book directory, read from its SQLite store."""
    import apsw

    conn = apsw.Connection(str(directory / "book.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        sql = "SELECT chunk_id, chapter_id, ordinal, start, end, n_tokens FROM chunks ORDER BY ordinal"
        return [[book_id, *row] for row in conn.execute(sql)]
    finally:
        conn.close()


def default_library() -> Path:
    """``$FOLIO_LIBRARY``, else the per-user data directory (``$XDG_DATA_HOME/folio``)."""
    env = os.environ.get("FOLIO_LIBRARY")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "folio"


class Library:
    """One library directory. Cheap to construct; book stores are opened lazily and shared."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_library()
        self.books_dir = self.path / "books"
        self.staging_dir = self.path / "staging"
        self.trash_dir = self.path / "trash"
        self.cache_dir = self.path / "cache"
        self.catalog_path = self.path / "catalog.duckdb"
        self._stores: dict[str, BookStore] = {}

    # --- writing -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[Library]:
        """Exclusive write access: takes the lock, recovers from any earlier crash."""
        for d in (self.books_dir, self.staging_dir, self.trash_dir, self.cache_dir):
            d.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FolioError(str(self.path), "another ingest is writing to this library") from None
            try:
                self.recover()
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def new_staging_dir(self, book_hint: str) -> Path:
        directory = self.staging_dir / f"{book_hint[:40]}-{uuid.uuid4().hex[:8]}"
        directory.mkdir(parents=True)
        return directory

    def recover(self) -> None:
        """Undo what a crash left behind, then make the catalog match the book directories."""
        for leftover in self.trash_dir.iterdir() if self.trash_dir.exists() else ():
            book_id = leftover.name.rsplit("-", 1)[0]
            target = self.books_dir / book_id
            if not target.exists() and (leftover / "book.json").exists():
                os.rename(leftover, target)  # crash between the two renames: put the old book back
            else:
                shutil.rmtree(leftover, ignore_errors=True)
        for leftover in self.staging_dir.iterdir() if self.staging_dir.exists() else ():
            shutil.rmtree(leftover, ignore_errors=True)
        self.sync_catalog()

    def install(self, staged: StagedBook) -> None:
        """Swap a complete staged book into ``books/`` and record it in the catalog (under ``writer()``)."""
        source = Path(staged.directory)
        if not (source / "book.json").exists():
            raise FolioError(staged.book_id, "staged book is incomplete; nothing was changed")
        target = self.books_dir / staged.book_id
        old = None
        if target.exists():
            old = self.trash_dir / f"{staged.book_id}-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
        os.rename(source, target)
        self._close_store(staged.book_id)
        self.sync_catalog()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def remove(self, book_id: str) -> None:
        target = self.books_dir / book_id
        if not target.exists():
            raise FolioError(book_id, "no such book in the library")
        old = self.trash_dir / f"{book_id}-{uuid.uuid4().hex[:8]}"
        self._close_store(book_id)
        os.rename(target, old)
        self.sync_catalog()
        shutil.rmtree(old, ignore_errors=True)

    # --- catalog -------------------------------------------------------------------------------
    def descriptors(self) -> list[dict[str, Any]]:
        """``book.json`` of every installed book, sorted by title then id."""
        out = []
        if self.books_dir.exists():
            for d in self.books_dir.iterdir():
                meta = d / "book.json"
                if meta.exists():
                    out.append(json.loads(meta.read_text(encoding="utf-8")))
        return sorted(out, key=lambda b: (b["title"].lower(), b["book_id"]))

    def sync_catalog(self) -> None:
        """Rewrite the catalog rows of books whose directory changed (one transaction)."""
        import duckdb

        books = {b["book_id"]: b for b in self.descriptors()}
        con = duckdb.connect(str(self.catalog_path))
        try:
            con.execute(CATALOG_SCHEMA)
            have = dict(
                con.execute(
                    "SELECT book_id, content_hash || '|' || embedding_model || '|' || chunk_tokens FROM books"
                ).fetchall()
            )
            want = {
                i: f"{b['content_hash']}|{b['embedding_model']}|{b['chunk_tokens']}" for i, b in books.items()
            }
            stale = [i for i in have if want.get(i) != have[i]]
            fresh = [i for i in want if have.get(i) != want[i]]
            if not stale and not fresh:
                return
            con.execute("BEGIN TRANSACTION")
            for book_id in stale:
                for table in ("books", "chapters", "chunks"):
                    con.execute(f"DELETE FROM {table} WHERE book_id = ?", [book_id])
            for book_id in fresh:
                b = books[book_id]
                con.execute(
                    "INSERT INTO books VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
                    [
                        b["book_id"],
                        b["title"],
                        b["author"],
                        b["language"],
                        b["source_file"],
                        b["format"],
                        b["content_hash"],
                        b["embedding_model"],
                        b["chunk_tokens"],
                        len(b["chapters"]),
                        b["n_chunks"],
                        b["n_windows"],
                    ],
                )
                con.executemany(
                    "INSERT INTO chapters VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        [book_id, c["chapter_id"], c["order"], c["title"], c["length"], c["n_chunks"]]
                        for c in b["chapters"]
                    ],
                )
                con.executemany(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
                    _chunk_rows(self.books_dir / book_id, book_id),
                )
            con.execute("COMMIT")
        finally:
            con.close()

    def books(self) -> list[dict[str, Any]]:
        """Catalog rows: id, title, author, chapters, chunks per book (from the book directories)."""
        return [
            {
                "book_id": b["book_id"],
                "title": b["title"],
                "author": b["author"],
                "language": b["language"],
                "source_file": b["source_file"],
                "chapters": len(b["chapters"]),
                "chunks": b["n_chunks"],
                "windows": b["n_windows"],
                "embedding_model": b["embedding_model"],
                "chunk_tokens": b["chunk_tokens"],
            }
            for b in self.descriptors()
        ]

    # --- reading -------------------------------------------------------------------------------
    def book_ids(self) -> list[str]:
        return [b["book_id"] for b in self.descriptors()]

    def resolve_book(self, ref: str) -> str:
        """A book id from an id, a unique id prefix, or a source file name."""
        books = self.descriptors()
        for b in books:
            if ref in (b["book_id"], b["source_file"]) or Path(ref).name == b["source_file"]:
                return b["book_id"]
        matches = [b["book_id"] for b in books if b["book_id"].startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        raise FolioError(ref, "no such book in the library" if not matches else "ambiguous book reference")

    def store(self, book_id: str) -> BookStore:
        if book_id not in self._stores:
            directory = self.books_dir / book_id
            if not (directory / "book.json").exists():
                raise FolioError(book_id, f"no such book in the library {self.path}")
            self._stores[book_id] = BookStore(directory)
        return self._stores[book_id]

    def concept_map(self, book_id: str) -> ConceptMap | None:
        """The book's concept map (``concept_map.json``), or None when the book has none."""
        path = self.books_dir / book_id / "concept_map.json"
        return ConceptMap.from_json(path.read_bytes()) if path.exists() else None

    def stores(self, book_ids: list[str] | None = None) -> list[BookStore]:
        return [self.store(b) for b in (book_ids if book_ids is not None else self.book_ids())]

    def _close_store(self, book_id: str) -> None:
        store = self._stores.pop(book_id, None)
        if store is not None:
            store.close()

    def close(self) -> None:
        for book_id in list(self._stores):
            self._close_store(book_id)
