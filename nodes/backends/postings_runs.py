"""Runs of term postings: the postings and word neighbours of many books merged into one row per term
(``nodes.backends.postings``, ``nodes.backends.neighbours``), so that a search of the whole library reads
a few rows a word instead of one per book.

Why: the term postings keep one row per (term, book): at 2,000,000 windows (1,291 books) a search of the
whole library read 1,291 rows for each query word and as many neighbour rows for each anchor, about 9 ms a
query of per-row work. A run holds, for each term, the records of every book of a range of first rowids,
concatenated in book order; a search reads each run's row, and one row per book for the few books added
since the newest run.

Layout (in ``library.sqlite``): ``runs(run, lo, hi, chunks, dead)`` a run's id (the generation that wrote
it), the first rowids of the books it holds (``lo``..``hi``: the runs hold ascending, disjoint ranges, and
a book is in a run or newer than every run), its chunks, and how many of them belong to books removed
since (``dead``: a search masks their records out); ``run_postings(term, run, chunks, records)`` and
``run_neighbours(term, run, near)``, the concatenated blobs (``chunks``: the records in ``records``, read
without reading the blob). The per-book rows stay: they are what a
search of some books reads, and what a fold reads.

Writing: the runs are written in the commit's transaction, so they are as crash-safe as the rows. A commit
leaves the newest books outside any run until ``RUN_MIN_BOOKS`` of them wait; then it folds them, with the
newest runs the tiered policy of the vector segments names (``vector_segments.merge_plan``, sizes in live
chunks), into one new run: each record is rewritten a few times over its life. A removal deletes no run
row (the run's ``dead`` grows; a run with nothing live left is dropped). ``compact`` folds every book into
one run.

Config: none (``RUN_MIN_BOOKS``). Limitations: the runs double the disk that the postings and neighbours
take; a library made before them keeps none (its searches read a row per book) until ``compact``
(``folio doctor --compact``) writes them; a fold reads its books' per-book rows term by term.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import astuple, dataclass, replace
from itertools import islice
from typing import Any

import numpy as np

from folio.nodes.backends.neighbours import MARKER
from folio.nodes.backends.postings import EVERY_CHUNK, POSTING
from folio.nodes.backends.vector_segments import merge_plan

RUN_MIN_BOOKS = 16  # books outside every run before a commit folds them into one
WRITE_BATCH = 512  # terms inserted at a time by a fold

RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs(
    run INTEGER PRIMARY KEY, lo INTEGER NOT NULL, hi INTEGER NOT NULL, chunks INTEGER NOT NULL,
    dead INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS run_postings(
    term TEXT NOT NULL, run INTEGER NOT NULL, chunks INTEGER NOT NULL, records BLOB NOT NULL,
    PRIMARY KEY(term, run)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_neighbours(
    term TEXT NOT NULL, run INTEGER NOT NULL, near BLOB NOT NULL, PRIMARY KEY(term, run)) WITHOUT ROWID;
"""
RUNS_TABLES = frozenset({"runs", "run_postings", "run_neighbours"})
KEPT = "runs"  # the meta key marking a library that keeps runs


@dataclass(frozen=True)
class Run:
    """A run: its id, the first rowids of its books (``lo``..``hi``), its chunks and the dead ones."""

    run: int
    lo: int
    hi: int
    chunks: int
    dead: int

    @property
    def live(self) -> int:
        return self.chunks - self.dead


def covered(runs: Sequence[Run]) -> int:
    """The highest first rowid a run holds (0 without runs): a book whose first rowid is above it is in
    no run."""
    return max((r.hi for r in runs), default=0)


def fold_plan(runs: Sequence[Run], waiting: Sequence[tuple[int, int]]) -> int | None:
    """How many of the newest ``runs`` (oldest first) a commit folds with the books in no run
    (``waiting``: each one's first rowid and chunks) into a new run; None: no fold (fewer than
    ``RUN_MIN_BOOKS`` books wait)."""
    if len(waiting) < RUN_MIN_BOOKS:
        return None
    return merge_plan([r.live for r in runs], sum(n for _, n in waiting))


def after_removal(runs: Sequence[Run], removed: Sequence[tuple[int, int]]) -> tuple[list[Run], list[int]]:
    """The runs once the books ``removed`` (first rowid, chunks) are gone: each holding one counts its
    chunks dead; returns the runs kept and the ids of those with nothing live left (to delete)."""
    kept, gone = [], []
    for r in runs:
        dead = r.dead + sum(n for lo, n in removed if r.lo <= lo <= r.hi)
        if dead >= r.chunks:
            gone.append(r.run)
        else:
            kept.append(replace(r, dead=dead))
    return kept, gone


def alive(rowids: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """Whether each of ``rowids`` is a chunk of a book the library holds (``owners``: each rowid's book,
    0 for none, as ``postings.Corpus`` keeps them)."""
    inside = rowids < len(owners)
    out = np.zeros(len(rowids), dtype=bool)
    out[inside] = owners[rowids[inside]] != 0
    return out


def read_runs(conn: Any) -> tuple[Run, ...]:
    """The runs of the connection's snapshot, oldest first (none in a library made before them, even one
    opened read-only without the table)."""
    import apsw

    try:
        return tuple(Run(*r) for r in conn.execute("SELECT run, lo, hi, chunks, dead FROM runs ORDER BY lo"))
    except apsw.SQLError:
        return ()


def _concatenated(conn: Any, table: str, column: str, lo_from: int) -> Iterator[tuple[str, bytes]]:
    """Each term of ``table`` held by a book whose first rowid is ``lo_from`` or more, with those books'
    blobs (``column``) joined in book order; the neighbours' marker row left out."""
    terms = [t for (t,) in conn.execute(f"SELECT DISTINCT term FROM {table} WHERE lo >= ?", (lo_from,))]
    sql = f"SELECT {column} FROM {table} WHERE term = ? AND lo >= ? ORDER BY lo"
    for term in terms:
        if table == "neighbours" and term == MARKER:
            continue
        yield term, b"".join(blob for (blob,) in conn.execute(sql, (term, lo_from)))


def write_run(conn: Any, run: int, lo_from: int) -> Run | None:
    """Inside a write transaction: run ``run`` of every book whose first rowid is ``lo_from`` or more, from
    their per-book rows (term by term: memory stays one term's records); None when no book is there."""
    books = list(
        conn.execute(
            "SELECT lo, length(records) FROM postings WHERE term = ? AND lo >= ? ORDER BY lo",
            (EVERY_CHUNK, lo_from),
        )
    )
    if not books:
        return None
    rows = _concatenated(conn, "postings", "records", lo_from)
    while batch := [(t, run, len(b) // POSTING.itemsize, b) for t, b in islice(rows, WRITE_BATCH)]:
        conn.executemany("INSERT INTO run_postings VALUES (?, ?, ?, ?)", batch)
    rows = _concatenated(conn, "neighbours", "near", lo_from)
    while near := [(t, run, b) for t, b in islice(rows, WRITE_BATCH)]:
        conn.executemany("INSERT INTO run_neighbours VALUES (?, ?, ?)", near)
    chunks = sum(int(n) for _, n in books) // POSTING.itemsize
    return Run(run, int(books[0][0]), int(books[-1][0]), chunks, 0)


def delete_runs(conn: Any, runs: Collection[int]) -> None:
    """Inside a write transaction: the rows of ``runs``."""
    if runs:
        ids = json.dumps(sorted(runs))
        for table in ("run_postings", "run_neighbours", "runs"):
            conn.execute(f"DELETE FROM {table} WHERE run IN (SELECT value FROM json_each(?))", (ids,))


def save_runs(conn: Any, runs: Sequence[Run]) -> None:
    """Inside a write transaction: ``runs`` as the library's list of runs."""
    conn.execute("DELETE FROM runs")
    conn.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", [astuple(r) for r in runs])


def commit_runs(conn: Any, run: int, removed: Sequence[tuple[int, int]]) -> None:
    """Inside a commit's transaction (its rows written): the runs after it, ``run`` the id of one it writes;
    ``removed``: the books it deleted (first rowid, chunks). Nothing in a library that keeps no runs."""
    if conn.execute("SELECT 1 FROM meta WHERE key = ?", (KEPT,)).fetchone() is None:
        return
    runs, gone = after_removal(read_runs(conn), removed)
    delete_runs(conn, gone)
    sql = "SELECT lo, length(records) FROM postings WHERE term = ? AND lo > ? ORDER BY lo"
    waiting = [
        (int(lo), int(n) // POSTING.itemsize) for lo, n in conn.execute(sql, (EVERY_CHUNK, covered(runs)))
    ]
    fold = fold_plan(runs, waiting)
    if fold is not None:
        folded, runs = runs[len(runs) - fold :], runs[: len(runs) - fold]
        delete_runs(conn, [r.run for r in folded])
        written = write_run(conn, run, folded[0].lo if folded else waiting[0][0])
        runs += [written] if written else []
    save_runs(conn, runs)


def rewrite_runs(conn: Any, run: int) -> None:
    """Inside a write transaction: every book in one run ``run`` (``compact``), the library marked as
    keeping runs from now on."""
    delete_runs(conn, [r.run for r in read_runs(conn)])
    written = write_run(conn, run, 0)
    save_runs(conn, [written] if written else [])
    conn.execute("INSERT OR IGNORE INTO meta VALUES (?, 'kept')", (KEPT,))


def runs_problem(conn: Any) -> str | None:
    """Why the postings runs do not hold the books they should, or None: each run's list of every chunk
    must be as long as the chunks it records, its live chunks those of the books in its range, and every
    book is in a run's range or newer than every run."""
    runs = read_runs(conn)
    books = dict(conn.execute("SELECT min(rowid), count(*) FROM chunks GROUP BY book_id"))
    sql = "SELECT run, length(records) FROM run_postings WHERE term = ?"
    held = {int(r): int(n) // POSTING.itemsize for r, n in conn.execute(sql, (EVERY_CHUNK,))}
    for r in runs:
        live = sum(n for lo, n in books.items() if r.lo <= lo <= r.hi)
        if held.get(r.run) != r.chunks or live != r.live:
            return f"the postings run {r.run} does not hold the chunks of its books"
    top = covered(runs)
    if any(lo <= top and not any(r.lo <= lo <= r.hi for r in runs) for lo in books):
        return "a book lies in no postings run"
    return None
