"""Postings runs (nodes/backends/postings_runs.py): the postings and word neighbours of many books merged into
one row per term, so that a search of the whole library reads a few rows a word. A search through the runs
equals FTS5's to the last bit after adds, folds, removals (dead records masked), a book replaced, a run
emptied and a compaction; ``check`` finds a run that does not hold its books and ``folio doctor`` writes
them again; a library made before them keeps none until compacted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.scaling import generated_library, small_books
from folio.dataflows.library import Library
from folio.nodes.backends import index_postings, postings_runs
from folio.nodes.backends.postings_runs import Run, after_removal, alive, covered, fold_plan
from tests import test_postings

QUERIES = (
    "the wolf ate the grandmother",
    "the whale rose out of the sea",
    "Off with her head!",
    "the king's daughter at the well",
    "how did Alice grow so tall",
    "Holmes examined the letter by the window",
    "zzzzqqq",
)


# --- the policy (pure) ----------------------------------------------------------------------------------
def test_books_wait_outside_the_runs_until_enough_of_them_do(monkeypatch) -> None:
    monkeypatch.setattr(postings_runs, "RUN_MIN_BOOKS", 4)
    assert fold_plan([], [(1, 10), (11, 10), (21, 10)]) is None
    assert fold_plan([], [(1, 10), (11, 10), (21, 10), (31, 10)]) == 0  # the first run: the four books
    small = [Run(g, g * 10, g * 10 + 5, 100, 0) for g in range(1, 4)]
    # three runs of one level and a fourth of the same size folds them all (tiered, factor 4)
    assert fold_plan(small, [(100, 25)] * 4) == 3
    big = [Run(1, 1, 500, 1_000_000, 0)]
    assert fold_plan(big, [(600, 10)] * 4) == 0  # a small run is not folded into a big one


def test_a_removal_counts_its_chunks_dead_in_its_run_and_drops_an_emptied_run() -> None:
    runs = [Run(5, 1, 40, 30, 0), Run(9, 50, 90, 20, 5)]
    kept, gone = after_removal(runs, [(10, 7), (95, 4)])  # the second book is in no run
    assert kept == [Run(5, 1, 40, 30, 7), Run(9, 50, 90, 20, 5)] and gone == []
    kept, gone = after_removal(runs, [(50, 9), (70, 6)])
    assert kept == [runs[0]] and gone == [9]
    assert covered(kept) == 40 and covered([]) == 0


def test_alive_keeps_the_rowids_of_books_the_library_holds() -> None:
    owners = np.array([0, 1, 1, 0, 0, 5, 5])  # rowids 3-4: a removed book; 7 and above: beyond
    rowids = np.array([1, 3, 5, 6, 7, 40])
    assert alive(rowids, owners).tolist() == [True, False, True, True, False, False]


# --- a library with runs ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pieces(data_dir: Path):
    return small_books(data_dir, 26, words=1500)


@pytest.fixture
def runs_library(tmp_path, pieces, monkeypatch) -> Library:
    """20 books, one commit each, runs folded from every third waiting book."""
    monkeypatch.setattr(postings_runs, "RUN_MIN_BOOKS", 3)
    lib = generated_library(tmp_path / "library", pieces[:20], batch=1)
    yield lib
    lib.close()


def _runs(lib: Library) -> tuple[Run, ...]:
    with lib.index._reading() as conn:
        return postings_runs.read_runs(conn)


def assert_equal_to_fts5(lib: Library, monkeypatch) -> None:
    """Every query, whole library and each book's best, k = 1 / 5 / 30: the postings (read through the
    runs) give FTS5's hits and float scores; a search of some books too."""
    some = sorted(lib.book_ids())[:3]
    for query in QUERIES:
        for k in (1, 5, 30):
            for per_book in (False, True):
                fts5, fast = test_postings.exact_and_postings(lib.index, query, k, per_book, monkeypatch)
                assert fast == fts5, (query, k, per_book)
            fts5, fast = test_postings.exact_and_postings(lib.index, query, k, False, monkeypatch, some)
            assert fast == fts5, (query, k, "books")
    assert lib.index.check() == []


def test_a_search_through_the_runs_reads_a_row_per_run_and_equals_fts5(runs_library, monkeypatch) -> None:
    runs = _runs(runs_library)
    assert len(runs) >= 2 and sum(r.live for r in runs) > 0
    assert [r.lo for r in runs] == sorted(r.lo for r in runs)
    with runs_library.index._reading() as conn:
        waiting = conn.execute(
            "SELECT count(*) FROM postings WHERE term = '' AND lo > ?", (covered(runs),)
        ).fetchone()[0]
        rows = runs_library.index._term_rows(conn, None)("postings", "the")
    assert waiting < 3 and len(rows) == len(runs) + waiting  # not one row per book
    assert_equal_to_fts5(runs_library, monkeypatch)


def test_removed_and_replaced_books_are_masked_out_of_their_runs(runs_library, pieces, monkeypatch) -> None:
    lib = runs_library
    first = _runs(lib)[0]
    with lib.index._reading() as conn:
        held = [b for b, lo in conn.execute("SELECT book_id, min(rowid) FROM chunks GROUP BY book_id")]
    opening = {b: lib.index.chunks_in(b)[0].text.split() for b in (held[0], held[1])}
    with lib.writer():
        lib.remove(held[0])
        lib.remove(held[5])
    assert any(r.dead for r in _runs(lib)) and _runs(lib)[0].run == first.run
    assert_equal_to_fts5(lib, monkeypatch)
    # a run of words only a removed book held is no bonus: the kept book's run earns the whole of it
    query = " ".join(opening[held[0]][:3] + opening[held[1]][:3])
    for k in (1, 10):
        fts5, fast = test_postings.exact_and_postings(lib.index, query, k, False, monkeypatch)
        assert fast == fts5, query
    # a book of a run ingested again: its old records are dead, its new ones wait outside the runs
    before = sum(r.dead for r in _runs(lib))
    monkeypatch.setattr(postings_runs, "RUN_MIN_BOOKS", 100)  # no fold: the records stay in their run
    generated_library(lib.path, [pieces[2]], batch=1).close()
    assert sum(r.dead for r in _runs(lib)) > before
    assert_equal_to_fts5(lib, monkeypatch)
    # every book of the first run removed: the run goes, its rows with it
    with lib.index._reading() as conn:
        inside = [
            b
            for b, lo in conn.execute("SELECT book_id, min(rowid) FROM chunks GROUP BY book_id")
            if first.lo <= lo <= first.hi
        ]
    with lib.writer():
        for book in inside:
            lib.remove(book)
    assert first.run not in {r.run for r in _runs(lib)}
    with lib.index._reading() as conn:
        assert not conn.execute("SELECT 1 FROM run_postings WHERE run = ?", (first.run,)).fetchone()
    assert_equal_to_fts5(lib, monkeypatch)


def test_compaction_folds_every_book_into_one_run(runs_library, monkeypatch) -> None:
    lib = runs_library
    with lib.writer():
        lib.remove(lib.book_ids()[3])
        lib.index.compact()
    runs = _runs(lib)
    assert len(runs) == 1 and runs[0].dead == 0
    assert runs[0].live == sum(d["n_chunks"] for d in lib.descriptors())
    assert_equal_to_fts5(lib, monkeypatch)


def test_more_books_fold_into_the_runs_as_they_come(tmp_path, pieces, monkeypatch) -> None:
    monkeypatch.setattr(postings_runs, "RUN_MIN_BOOKS", 2)
    lib = generated_library(tmp_path / "library", pieces[:4], batch=1)
    try:
        assert len(_runs(lib)) == 2  # books 1-2 and 3-4
        more = generated_library(tmp_path / "library", pieces[4:], batch=4)  # 4 + 4 + 4 + 4 + 2 more
        more.close()
        runs = _runs(lib)
        assert sum(r.live for r in runs) == sum(d["n_chunks"] for d in lib.descriptors())
        assert len(runs) <= 6
        assert_equal_to_fts5(lib, monkeypatch)
    finally:
        lib.close()


def test_check_finds_a_run_that_does_not_hold_its_books_and_doctor_writes_them_again(
    runs_library, monkeypatch
) -> None:
    lib = runs_library
    run = _runs(lib)[0]
    with lib.writer():
        conn = lib.index._conn()
        conn.execute("DELETE FROM run_postings WHERE run = ? AND term = ''", (run.run,))
    assert any("postings run" in p for p in lib.index.check())
    with lib.writer():
        lib.index.write_every_postings()  # what `folio doctor` runs for a postings problem
    assert lib.index.check() == [] and len(_runs(lib)) == 1
    assert_equal_to_fts5(lib, monkeypatch)


def test_a_library_made_before_the_runs_keeps_none_until_compacted(tmp_path, pieces, monkeypatch) -> None:
    monkeypatch.setattr(postings_runs, "RUN_MIN_BOOKS", 2)
    lib = generated_library(tmp_path / "library", pieces[:2], batch=1)
    try:
        with lib.writer():  # as a library of stop 47 left it: no runs, no mark
            conn = lib.index._conn()
            for table in ("run_postings", "run_neighbours", "runs"):
                conn.execute(f"DELETE FROM {table}")
            conn.execute("DELETE FROM meta WHERE key = ?", (postings_runs.KEPT,))
        more = generated_library(tmp_path / "library", pieces[2:6], batch=1)
        more.close()
        assert _runs(lib) == ()  # its commits write none
        assert_equal_to_fts5(lib, monkeypatch)
        with lib.writer():
            lib.index.compact()
        assert len(_runs(lib)) == 1
        more = generated_library(tmp_path / "library", pieces[6:8], batch=1)
        more.close()
        assert len(_runs(lib)) == 2  # from now on the commits fold
        assert_equal_to_fts5(lib, monkeypatch)
    finally:
        lib.close()


def test_the_whole_library_is_read_from_the_runs_in_a_large_library(runs_library, monkeypatch) -> None:
    """Through the search the user runs: ``lexical`` reads the runs' rows (spied), not one per book."""
    read: list[str] = []
    original = index_postings.IndexPostings._term_rows

    def spy(self, conn, books):
        rows_of = original(self, conn, books)

        def counted(table, term):
            rows = rows_of(table, term)
            read.append(f"{table}:{len(rows)}")
            return rows

        return counted

    monkeypatch.setattr(index_postings.IndexPostings, "_term_rows", spy)
    monkeypatch.setattr(index_postings, "POSTINGS_MIN_CHUNKS", 0)
    runs_library.index.lexical("the whale rose out of the sea", 10)
    assert read and all(int(r.split(":")[1]) <= len(_runs(runs_library)) + 2 for r in read)


def test_words_without_idf_are_left_out_of_a_large_librarys_search_as_fts5s_path_does(
    runs_library, monkeypatch
) -> None:
    """A word held by half the chunks or more adds at most 1e-6 to a score: a whole-library search of a
    large library (here: any) leaves it out, reads none of its rows, and gives FTS5's path's hits and
    scores (which leaves it out the same way); the k-th hit checked against what it could add."""
    from folio.nodes.backends import index_search

    lib = runs_library
    with lib.index._reading() as conn:
        rows = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        common = [
            t
            for t, n in conn.execute("SELECT term, sum(chunks) FROM run_postings GROUP BY term")
            if t and n * 2 >= rows and t.isalpha()
        ]
    assert common, "no word in half the chunks"
    monkeypatch.setattr(index_search, "LARGE_LIBRARY_CHUNKS", 0)
    read: list[str] = []
    original = index_postings.IndexPostings._term_rows

    def spy(self, conn, books):
        rows_of = original(self, conn, books)

        def counted(table, term):
            read.append(term)
            return rows_of(table, term)

        return counted

    monkeypatch.setattr(index_postings.IndexPostings, "_term_rows", spy)
    unread = 0
    for query in (f"{common[0]} wolf grandmother", f"the {common[0]} of the sea", f"{common[0]} Alice"):
        for k in (1, 10):
            read.clear()
            fts5, fast = test_postings.exact_and_postings(lib.index, query, k, False, monkeypatch)
            assert fast == fts5, query
            unread += common[0] not in read  # else the k-th hit did not beat what it could add
    assert unread >= 3
    with lib.index._reading() as conn:
        dropped = lib.index._no_idf(conn, [f'"{common[0]}"', '"wolf"'], 1, (0, index_search.NO_IDF))
        assert dropped == {f'"{common[0]}"'}
