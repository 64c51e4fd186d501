"""Writes to the library index (``nodes.backends.library_index``): ``commit`` adds and removes whole books
in one SQLite transaction, the new windows in a new vector segment fsynced before it commits.

Config: none. Limitations: see ``nodes.backends.library_index``; ``checkpoint`` names each step of a
write, for the crash tests.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.backends.index_store import FTS_TOKENIZE, IndexStore, apsw_busy, sql_in
from folio.nodes.backends.neighbours import book_neighbours, skipped_terms
from folio.nodes.backends.postings import fts5_tokenizer, tokens_postings
from folio.nodes.backends.postings_runs import commit_runs
from folio.nodes.backends.vector_segments import (
    Segment,
    after_removal,
    build_index,
    merge_plan,
    save_index,
    window_batches,
)
from folio.nodes.core.types import FolioError


def checkpoint(step: str) -> None:
    """A named step of a write (``commit``); does nothing. Crash tests replace it to kill the process
    at that step."""


def write_postings(conn: Any, chunks: Sequence[tuple[int, str]]) -> None:
    """Insert the postings of one book's ``chunks`` (``(rowid, text)``), keyed by its first rowid, and (in a
    library that has them) its word neighbours."""
    if not chunks:
        return
    lo = min(rowid for rowid, _ in chunks)
    if max(rowid for rowid, _ in chunks) >= 2**32:
        raise FolioError(str(lo), "chunk keys beyond 2**32: the postings cannot hold them")
    tokenize = fts5_tokenizer(conn, FTS_TOKENIZE)
    tokens = [(rowid, tokenize(text)) for rowid, text in chunks]
    records = tokens_postings(tokens)
    conn.executemany("INSERT INTO postings VALUES (?, ?, ?)", [(t, lo, r) for t, r in records.items()])
    skipped = skipped_terms(dict(conn.execute("SELECT key, value FROM meta WHERE key = 'neighbours'")))
    if skipped is not None:
        ids = vocabulary(conn, {t for _, held in tokens for t in held})
        rows = book_neighbours(tokens, ids, skipped)
        conn.executemany("INSERT INTO neighbours VALUES (?, ?, ?)", [(t, lo, r) for t, r in rows.items()])


def vocabulary(conn: Any, terms: set[str]) -> dict[str, int]:
    """The library's id of each of ``terms``, new ones given the next ids (inside the write transaction)."""
    ordered = sorted(terms)
    sql = "SELECT term, id FROM terms WHERE term IN (SELECT value FROM json_each(?))"
    ids = {str(t): int(i) for t, i in conn.execute(sql, (json.dumps(ordered),))}
    new = [t for t in ordered if t not in ids]
    if new:
        start = int(conn.execute("SELECT coalesce(max(id), 0) FROM terms").fetchone()[0]) + 1
        conn.executemany("INSERT INTO terms VALUES (?, ?)", [(start + i, t) for i, t in enumerate(new)])
        ids.update({t: start + i for i, t in enumerate(new)})
    return ids


@dataclass(frozen=True)
class StagedRows:
    """One book to write: its staged directory (``book.sqlite`` with chapters, chunks and windows;
    ``vectors.npy``), its descriptor and its concept map (JSON bytes, or None)."""

    book_id: str
    directory: str
    descriptor: dict[str, Any]
    concept_map: bytes | None


@dataclass(frozen=True)
class VectorSettings:
    """The library HNSW's settings (fixed by its first book with vectors)."""

    connectivity: int = 16
    expansion_add: int = 128
    dtype: str = "i8"


class IndexWrite(IndexStore):
    """The library index's writes."""

    # --- writing -----------------------------------------------------------------------------------
    def _staged(self, book: StagedRows) -> tuple[list[tuple], list[tuple], list[tuple], np.ndarray]:
        """Chapters, chunks and windows rows of a staged ``book.sqlite``, and its vectors."""
        import apsw

        directory = Path(book.directory)
        try:
            conn = apsw.Connection(str(directory / "book.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as exc:
            raise FolioError(
                book.book_id, f"staged book is unreadable ({exc}); nothing was changed"
            ) from None
        try:
            chapters = list(conn.execute("SELECT chapter_id, ord, title, text FROM chapters ORDER BY ord"))
            chunks = list(
                conn.execute(
                    "SELECT rowid, chunk_id, chapter_id, ordinal, start, end, n_tokens, text FROM chunks "
                    "ORDER BY rowid"
                )
            )
            windows = list(
                conn.execute("SELECT window_id, chunk_rowid, start, end FROM windows ORDER BY window_id")
            )
        except apsw.Error as exc:
            raise FolioError(
                book.book_id, f"staged book is unreadable ({exc}); nothing was changed"
            ) from None
        finally:
            conn.close()
        if windows:
            vectors = np.load(directory / "vectors.npy", mmap_mode="r")
            if len(vectors) < len(windows):
                raise FolioError(
                    book.book_id, "staged vectors are fewer than its windows; nothing was changed"
                )
        else:
            vectors = np.zeros((0, 0), dtype=np.float32)
        return chapters, chunks, windows, vectors

    def _settings_for(
        self, meta: dict[str, str], books: Sequence[StagedRows], settings: VectorSettings
    ) -> dict[str, str]:
        """The library's model and HNSW settings; a book from another model or size is refused."""
        out: dict[str, str] = {
            k: meta[k]
            for k in ("embedding_model", "ndim", "connectivity", "expansion_add", "dtype")
            if k in meta
        }
        for book in books:
            model = str(book.descriptor.get("embedding_model", ""))
            if "embedding_model" in out and out["embedding_model"] != model:
                raise FolioError(
                    book.descriptor.get("source_file") or book.book_id,
                    f"embedded with {model}, but this library holds books embedded with "
                    f"{out['embedding_model']}: "
                    "ingest it into another library (--library) or re-ingest every book with one model",
                )
            out.setdefault("embedding_model", model)
        out.setdefault("connectivity", str(settings.connectivity))
        out.setdefault("expansion_add", str(settings.expansion_add))
        out.setdefault("dtype", settings.dtype)
        return out

    def _write_segments(
        self,
        conn: Any,
        generation: int,
        segments: Sequence[Segment],
        removed: Sequence[int],
        new: tuple[int, int],
        settings: dict[str, str],
    ) -> Path | None:
        """Inside the commit's transaction: the segments of ``generation``: ``segments`` less the
        ``removed`` keys, and the windows of keys ``new`` (first, last) written with the newest segments
        the merge policy folds to ``vectors-<generation>.usearch``; records
        them in the ``segments`` table. Returns the file written (None when only rows changed)."""
        kept = after_removal(segments, removed)
        fresh = max(0, new[1] - new[0] + 1)
        fold = merge_plan([s.live for s in kept], fresh) if fresh else 0  # a removal writes no file
        written = None
        if fresh or fold:
            folded = kept[len(kept) - fold :]
            kept = kept[: len(kept) - fold]
            lo = folded[0].lo if folded else new[0]
            hi = max(new[1], folded[-1].hi if folded else new[1])
            index, size = build_index(settings, window_batches(conn, lo, hi))
            if size:
                written = self.vectors_path(generation)
                checkpoint("segment_built")
                save_index(index, written)
                kept.append(Segment(generation, lo, hi, size, size))
        conn.execute("DELETE FROM segments")
        conn.executemany(
            "INSERT INTO segments VALUES (?, ?, ?, ?, ?)",
            [(s.generation, s.lo, s.hi, s.size, s.live) for s in kept],
        )
        return written

    @staticmethod
    def _delete_books(conn: Any, book_ids: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
        """Delete the books' rows (chapters, chunks and their FTS5 entries, postings, windows, the book);
        returns the keys their windows had (dead in their segments from now on) and each book's first
        chunk rowid and chunks (dead in their postings run)."""
        if not book_ids:
            return [], []
        where, params = sql_in("book_id", book_ids)
        old_keys = [r[0] for r in conn.execute(f"SELECT key FROM windows WHERE {where}", params)]
        sql = f"SELECT min(rowid), count(*) FROM chunks WHERE {where} GROUP BY book_id"
        firsts = [(int(lo), int(n)) for lo, n in conn.execute(sql, params)]
        for table in ("postings", "neighbours"):
            conn.execute(
                f"DELETE FROM {table} WHERE lo IN (SELECT value FROM json_each(?))",
                (json.dumps([lo for lo, _ in firsts]),),
            )
        conn.execute(
            "INSERT INTO chunks_fts(chunks_fts, rowid, text) "
            "SELECT 'delete', rowid, text FROM chunks "
            f"WHERE {where}",
            params,
        )
        for table in ("windows", "chunks", "chapters", "books"):
            conn.execute(f"DELETE FROM {table} WHERE {where}", params)
        return old_keys, firsts

    @staticmethod
    def _insert_book(
        conn: Any, book: StagedRows, rows: list[Any], lib: dict[str, str], next_chunk: int, next_window: int
    ) -> tuple[int, int]:
        """Insert one staged book's rows (``rows``: chapters, chunks, windows, vectors, as ``_staged``)
        with chunk keys from ``next_chunk`` and window keys from ``next_window``; returns the next free
        keys. The library's vector dimensions (``lib["ndim"]``) are set by its first vectors."""
        chapters, chunks, windows, vectors = rows
        conn.executemany(
            "INSERT INTO chapters VALUES (?, ?, ?, ?, ?)", [(book.book_id, *c) for c in chapters]
        )
        base = next_chunk - min((c[0] for c in chunks), default=0)
        conn.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(base + c[0], book.book_id, *c[1:]) for c in chunks],
        )
        conn.execute(
            "INSERT INTO chunks_fts(rowid, text) SELECT rowid, text FROM chunks WHERE book_id = ?",
            (book.book_id,),
        )
        write_postings(conn, [(base + c[0], c[7]) for c in chunks])
        next_chunk = base + max((c[0] for c in chunks), default=next_chunk - base - 1) + 1
        if windows:
            matrix = np.ascontiguousarray(vectors[[w[0] for w in windows]], dtype=np.float32)
            lib.setdefault("ndim", str(matrix.shape[1]))
            if int(lib["ndim"]) != matrix.shape[1]:
                raise FolioError(
                    book.book_id,
                    f"vectors of {matrix.shape[1]} dimensions, the library's have {lib['ndim']}",
                )
            keys = np.arange(next_window, next_window + len(windows), dtype=np.int64)
            conn.executemany(
                "INSERT INTO windows VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (int(key), book.book_id, base + w[1], w[2], w[3], matrix[i].tobytes())
                    for i, (key, w) in enumerate(zip(keys, windows, strict=True))
                ],
            )
            next_window += len(windows)
        descriptor = json.dumps(book.descriptor, ensure_ascii=False)
        conn.execute(
            "INSERT INTO books VALUES (?, ?, ?, ?)",
            (book.book_id, str(book.descriptor.get("title", "")), descriptor, book.concept_map),
        )
        return next_chunk, next_window

    def commit(
        self,
        add: Sequence[StagedRows] = (),
        remove: Sequence[str] = (),
        settings: VectorSettings = VectorSettings(),
    ) -> None:
        """Replace the books of ``add`` (adding new ones) and drop the books of ``remove``, in one
        transaction with the next generation's HNSW; readers see the library before or after."""
        staged = [(book, *self._staged(book)) for book in add]
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        written: Path | None = None
        try:
            checkpoint("begin")
            meta = self._meta(conn)
            segments = self._segments(conn)
            generation = int(meta["generation"])
            lib = self._settings_for(meta, add, settings)
            affected = sorted({b.book_id for b in add} | set(remove))
            old_keys, removed = self._delete_books(conn, affected)
            checkpoint("deleted")
            next_chunk, next_window = int(meta["next_chunk"]), int(meta["next_window"])
            for book, *rows in staged:
                next_chunk, next_window = self._insert_book(conn, book, rows, lib, next_chunk, next_window)
            checkpoint("inserted")
            commit_runs(conn, generation + 1, removed)
            checkpoint("runs_written")
            if "ndim" in lib:
                written = self._write_segments(
                    conn, generation + 1, segments, old_keys, (int(meta["next_window"]), next_window - 1), lib
                )
            checkpoint("vectors_written")
            updates = {
                **lib,
                "generation": str(generation + 1),
                "next_chunk": str(next_chunk),
                "next_window": str(next_window),
            }
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(updates.items()))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # SQLite may have rolled back already (a full disk)
                conn.execute("ROLLBACK")
            if written is not None:
                written.unlink(missing_ok=True)
            raise
        checkpoint("committed")
        with contextlib.suppress(apsw_busy()):  # readers still in the log: the next commit truncates it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the database file alone holds the library
        self.remove_stale_vectors()
        checkpoint("cleaned")
