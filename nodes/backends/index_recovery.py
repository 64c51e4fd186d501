"""Checks and recovery of the library index (``nodes.backends.library_index``): ``check`` (what is
damaged), ``compact`` (one vector segment, FTS5 optimised) and ``rebuild_vectors``.

Config: none. Limitations: see ``nodes.backends.library_index``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from folio.nodes.backends import index_write
from folio.nodes.backends.index_write import IndexWrite, write_postings
from folio.nodes.backends.neighbours import MARKER, skipped_terms
from folio.nodes.backends.postings import EVERY_CHUNK, POSTING
from folio.nodes.backends.postings_runs import rewrite_runs, runs_problem
from folio.nodes.backends.progress import NullProgress, Progress
from folio.nodes.backends.vector_segments import (
    Segment,
)


class IndexRecovery(IndexWrite):
    """The library index's checks and recovery."""

    def compact(self, progress: Progress | None = None) -> int:
        """Fold every vector segment into one file and every book's postings into one run (a new generation,
        one transaction, as ``commit``), then let FTS5 merge its own segments (``optimize``); returns the
        number of windows indexed. Also
        how a missing or damaged vectors file is rebuilt (``rebuild_vectors``), and how a library made
        before the term postings gets them (``progress``: a book at a time)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        written: Path | None = None
        try:
            meta = self._meta(conn)
            generation = int(meta["generation"])
            if meta.get("postings") != "complete" or skipped_terms(meta) is None:
                self._write_every_postings(conn, progress)
            rewrite_runs(conn, generation + 1)
            index_write.checkpoint("runs_written")
            if "ndim" in meta:  # no segment kept: one new one over every key
                top = int(meta["next_window"]) - 1
                written = self._write_segments(conn, generation + 1, (), (), (1, top), meta)
            index_write.checkpoint("compacted")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(generation + 1),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            if written is not None:
                written.unlink(missing_ok=True)
            raise
        index_write.checkpoint("committed")
        with self._lock:
            self._views.clear()
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.remove_stale_vectors()
        return sum(seg.live for seg in self.segments())

    @staticmethod
    def _write_every_postings(conn: Any, progress: Progress | None = None) -> None:
        """Inside a write transaction: the postings and neighbour rows of every book, written again (a
        library made before them), and the marks that they are whole; ``progress`` counts the books."""
        progress = progress or NullProgress()
        conn.execute("DELETE FROM postings")
        conn.execute("DELETE FROM neighbours")
        IndexRecovery._start_neighbours(conn)
        books = [b for (b,) in conn.execute("SELECT DISTINCT book_id FROM chunks ORDER BY book_id")]
        progress.add_total(len(books))
        for book_id in books:
            chunks = list(
                conn.execute("SELECT rowid, text FROM chunks WHERE book_id = ? ORDER BY rowid", (book_id,))
            )
            write_postings(conn, chunks)
            progress.advance(1)
        progress.close()
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('postings', 'complete')")

    def _as_new_generation(self, write: Callable[[Any, int], None]) -> None:
        """``write(connection, next generation)`` in one write transaction that makes the next generation."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            generation = int(self._meta(conn)["generation"]) + 1
            write(conn, generation)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(generation),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            raise

    def write_every_postings(self, progress: Progress | None = None) -> None:
        """Write the postings of every book and one postings run of them all, as a new generation (one
        transaction): what ``compact`` does first for a library made before them, on its own."""

        def write(conn: Any, generation: int) -> None:
            self._write_every_postings(conn, progress)
            rewrite_runs(conn, generation)

        self._as_new_generation(write)

    def write_runs(self) -> None:
        """Fold every book's postings into one run, as a new generation (one transaction): how a library
        made before the runs gets them without the rest of ``compact``."""
        self._as_new_generation(rewrite_runs)

    def segments(self) -> tuple[Segment, ...]:
        """The current generation's vector segments, oldest first."""
        with self._reading() as conn:
            return self._segments(conn)

    def rebuild_vectors(self) -> int:
        """Write one vectors file of every stored window again (a missing or damaged file), as a new
        generation; returns the number of windows indexed."""
        with self._lock:
            self._views.clear()  # drop damaged views before their files are replaced
        return self.compact()

    def lexical_problem(self) -> str | None:
        """Why the FTS5 index does not match the chunks (its ``integrity-check``), or None."""
        import apsw

        try:
            self._conn().execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        except apsw.Error as exc:
            return str(exc)
        return None

    def postings_problem(self) -> str | None:
        """Why the term postings do not cover the chunks (each book's list of every chunk), or None;
        None too for a library made before them (they are written by ``compact``)."""
        with self._reading() as conn:
            if self._meta(conn).get("postings") != "complete":
                return None
            held = {
                int(lo): len(records) // POSTING.itemsize
                for lo, records in conn.execute(
                    "SELECT lo, records FROM postings WHERE term = ?", (EVERY_CHUNK,)
                )
            }
            chunks = dict(conn.execute("SELECT min(rowid), count(*) FROM chunks GROUP BY book_id"))
            marked = None
            if skipped_terms(self._meta(conn)) is not None:
                sql = "SELECT lo FROM neighbours WHERE term = ?"
                marked = {int(lo) for (lo,) in conn.execute(sql, (MARKER,))}
        if held != chunks:
            wrong = len({lo for lo in held.keys() | chunks.keys() if held.get(lo) != chunks.get(lo)})
            return f"the term postings of {wrong} books do not match their chunks"
        if marked is not None and marked != set(chunks):
            return f"the word neighbours of {len(marked ^ set(chunks))} books do not match their chunks"
        with self._reading() as conn:
            return runs_problem(conn)

    def check(self) -> list[str]:
        """Problems found (empty when whole): FTS5 integrity, counts against descriptors, the HNSW."""
        problems: list[str] = []
        lexical = self.lexical_problem()
        if lexical is not None:
            problems.append(f"lexical index: {lexical}")
        postings = self.postings_problem()
        if postings is not None:
            problems.append(f"lexical index: {postings}")
        with self._reading() as conn:
            segments = self._segments(conn)
            for seg in segments:
                live = conn.execute(
                    "SELECT count(*) FROM windows WHERE key BETWEEN ? AND ?", (seg.lo, seg.hi)
                ).fetchone()[0]
                if live != seg.live:
                    path = self.vectors_path(seg.generation)
                    problems.append(f"{path}: {seg.live} live windows recorded, {live} stored")
            counts = dict(conn.execute("SELECT book_id, count(*) FROM chunks GROUP BY book_id"))
            windows = dict(conn.execute("SELECT book_id, count(*) FROM windows GROUP BY book_id"))
            for (descriptor,) in conn.execute("SELECT descriptor FROM books"):
                d = json.loads(descriptor)
                if (
                    counts.get(d["book_id"], 0) != d["n_chunks"]
                    or windows.get(d["book_id"], 0) != d["n_windows"]
                ):
                    problems.append(f"{d['book_id']}: chunks or windows do not match its descriptor")
            total = sum(windows.values())
        if total != sum(seg.live for seg in segments):
            problems.append(f"{self.directory}: the vector segments do not cover every window")
        damaged = self.damaged_vectors()
        if damaged is not None:
            problems.append(f"{damaged}: missing, damaged or incomplete")
        return problems
