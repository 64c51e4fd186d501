"""Term postings beside FTS5 (nodes/backends/postings.py): written with each book's chunks, they score a
whole-library search exactly as FTS5's bm25 does (the same hits, the same float scores), without FTS5
scoring every chunk that holds a common word."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.library import Library
from folio.nodes.backends import index_postings
from folio.nodes.backends.index_search import _varint
from folio.nodes.backends.postings import (
    EVERY_CHUNK,
    Scored,
    bm25_scores,
    book_postings,
    contenders,
    held_among,
    kth_best,
    ranked,
    ranked_per_book,
    unpack,
)
from folio.nodes.backends.progress import Progress

QUERIES = (
    "the wolf ate the grandmother",
    "Why did the queen want Snow-white dead?",
    "What did Peter Rabbit lose in Mr. McGregor's garden?",
    "Off with her head!",
    "the king's daughter at the well",
    "Who said 'we're all mad here'?",
    "How many kids did the old goat have?",
    "café au lait o'clock",
    "sea",
    "zzzzqqq",
)


def _whitespace(text: str) -> list[str]:
    return text.lower().split()


def test_book_postings_count_each_term_per_chunk_with_the_chunks_length() -> None:
    records = book_postings(_whitespace, [(7, "the wolf"), (5, "the wolf ate the grandmother")])
    every = unpack([records[EVERY_CHUNK]])
    assert every["rowid"].tolist() == [5, 7] and every["size"].tolist() == [5, 2]
    the = unpack([records["the"]])
    assert [tuple(int(x) for x in r) for r in the] == [(5, 2, 5), (7, 1, 2)]
    assert unpack([records["ate"]])["rowid"].tolist() == [5]
    assert set(records) == {EVERY_CHUNK, "the", "wolf", "ate", "grandmother"}


def test_bm25_scores_are_fts5s_formula_per_term_in_query_order() -> None:
    records = book_postings(_whitespace, [(1, "a b b"), (2, "b c"), (3, "c c c c")])
    per_term = [unpack([records["b"]]), unpack([records["c"]])]
    scores = bm25_scores(per_term, rows=3, avgdl=3.0, span=4)

    def part(idf: float, f: float, d: float) -> float:
        return idf * ((f * 2.2) / (f + 1.2 * (1 - 0.75 + 0.75 * d / 3.0)))

    idf = math.log((3 - 2 + 0.5) / (2 + 0.5))  # negative: FTS5's floor
    assert idf < 0
    assert scores[0] == 0.0
    assert scores[1] == 0.0 + part(1e-6, 2, 3)
    assert scores[2] == 0.0 + part(1e-6, 1, 2) + part(1e-6, 1, 2)
    assert scores[3] == 0.0 + part(1e-6, 4, 4)


def test_ranked_scores_the_k_best_and_the_bonus_holders_ties_to_the_lower_rowid() -> None:
    scores = np.array([0.0, 5.0, 4.0, 4.0, 1.0, 0.5])
    matched = np.array([1, 2, 3, 4, 5])

    def bonus(rowids: np.ndarray) -> np.ndarray:
        return 10.0 * np.isin(rowids, [5])

    assert ranked(scores, matched, bonus, np.array([5]), 2) == [(5, 10.5), (1, 5.0)]
    assert ranked(scores, matched, lambda r: np.zeros(len(r)), np.array([], dtype=int), 3) == [
        (1, 5.0),
        (2, 4.0),
        (3, 4.0),
    ]
    assert ranked(scores, np.array([], dtype=int), bonus, np.array([5]), 3) == []


def test_ranked_per_book_keeps_k_of_each_book_in_one_order() -> None:
    scores = np.array([0.0, 5.0, 4.0, 3.0, 6.0, 1.0])
    matched = np.array([1, 2, 3, 4, 5])
    owners = np.array([1, 1, 1, 4, 4])  # two books: rowids 1-3 and 4-5
    none = lambda r: np.zeros(len(r))  # noqa: E731
    assert ranked_per_book(scores, matched, owners, none, 1) == [(4, 6.0), (1, 5.0)]
    assert ranked_per_book(scores, matched, owners, none, 2) == [(4, 6.0), (1, 5.0), (2, 4.0), (5, 1.0)]


def test_contenders_are_the_possible_holders_that_can_still_reach_the_kth_best() -> None:
    """Golden case: bm25 by rowid 0..5; the 2nd best bm25 is 8; rows 1 and 3 may hold a phrase worth half
    the best (5), row 4 also a second bonus worth 0.2 (2)."""
    found = Scored(np.array([0.0, 2.0, 10.0, 4.0, 8.0, 1.0]), np.array([1, 2, 3, 4, 5]), 10.0)
    assert kth_best(found, 2) == 8.0 and kth_best(found, 5) is None  # five match: all of them rank
    possible = [(0.5, np.array([1, 3, 4])), (0.2, np.array([4, 5]))]
    # 2 + 5 < 8 (row 1 cannot rank), 4 + 5 >= 8, 8 + 5 + 2 >= 8
    assert contenders(found, possible, 8.0, 0).tolist() == [3, 4]
    assert contenders(found, possible, 8.0, 1).tolist() == [4]  # row 5: 1 + 2 < 8
    assert contenders(found, possible, None, 0).tolist() == [1, 3, 4]  # every match ranks
    assert contenders(found, [(0.5, None)], 8.0, 0) is None  # any chunk may hold it: FTS5 alone decides
    assert held_among(np.array([1, 4, 9]), np.array([9, 4])).tolist() == [False, True, True]
    assert held_among(np.array([1]), np.zeros(0, dtype=np.int64)).tolist() == [False]


@pytest.fixture(scope="module")
def fairy_copy(fairytale_library: Path, tmp_path_factory) -> Library:
    """A private copy of the FairytaleQA library (three real books), searched from its postings."""
    target = tmp_path_factory.mktemp("postings") / "library"
    shutil.copytree(fairytale_library, target)
    return Library(target)


def exact_and_postings(
    index, query: str, k: int, per_book: bool, monkeypatch, books: list[str] | None = None
) -> tuple[list, list]:
    monkeypatch.setattr(index_postings, "POSTINGS_MIN_CHUNKS", 10**9)
    fts5 = index.lexical(query, k, books, per_book=per_book)
    monkeypatch.setattr(index_postings, "POSTINGS_MIN_CHUNKS", 0)
    fast = index.lexical(query, k, books, per_book=per_book)
    return (
        [(h.book_id, h.chunk_id, h.score) for h in fts5],
        [(h.book_id, h.chunk_id, h.score) for h in fast],
    )


def test_the_postings_hold_what_fts5_indexed(fairy_copy: Library) -> None:
    """Each chunk's length is FTS5's own count of its tokens, and each term's chunks are those FTS5
    matches for it (its tokenizer, called through apsw)."""
    index = fairy_copy.index
    with index._reading() as conn:
        sizes = {
            int(r): _varint(bytes(sz)) for r, sz in conn.execute("SELECT id, sz FROM chunks_fts_docsize")
        }
        blocks = [b for (b,) in conn.execute("SELECT records FROM postings WHERE term = ?", (EVERY_CHUNK,))]
        every = unpack(blocks)
        assert dict(zip(every["rowid"].tolist(), every["size"].tolist(), strict=True)) == sizes
        for word in ("wolf", "grandmoth", "rabbit", "the", "snow", "gooseberri"):
            held = unpack(b for (b,) in conn.execute("SELECT records FROM postings WHERE term = ?", (word,)))
            fts5 = [
                r for (r,) in conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (word,))
            ]
            assert sorted(held["rowid"].tolist()) == sorted(fts5) and len(fts5) > 0, word


def test_a_search_from_the_postings_equals_fts5s_to_the_last_bit(fairy_copy: Library, monkeypatch) -> None:
    """The whole library (FTS5's bm25) and some books (the books' own statistics, ``scoped_bm25``)."""
    index = fairy_copy.index
    every = sorted(d["book_id"] for d in fairy_copy.descriptors())
    used = []
    rows = index_postings.IndexPostings._postings_rows

    def spy(self, *args):
        found = rows(self, *args)
        used.append(found is not None)
        return found

    monkeypatch.setattr(index_postings.IndexPostings, "_postings_rows", spy)
    for books in (None, every[:1], every[1:], [*every, "not-a-book"]):
        for query in QUERIES:
            for k, per_book in ((1, False), (10, False), (30, False), (1, True), (3, True)):
                fts5, fast = exact_and_postings(index, query, k, per_book, monkeypatch, books)
                assert fast == fts5, (query, k, per_book, books)
    assert sum(used) >= 160  # the postings did the scoring (not FTS5 twice)


def test_removing_a_book_removes_its_postings(fairy_copy: Library, monkeypatch) -> None:
    index = fairy_copy.index
    book = sorted(d["book_id"] for d in fairy_copy.descriptors())[0]
    with index._reading() as conn:
        lo = conn.execute("SELECT min(rowid) FROM chunks WHERE book_id = ?", (book,)).fetchone()[0]
        assert conn.execute("SELECT count(*) FROM postings WHERE lo = ?", (lo,)).fetchone()[0] > 1000
    with fairy_copy.writer():
        fairy_copy.remove(book)
    with index._reading() as conn:
        assert conn.execute("SELECT count(*) FROM postings WHERE lo = ?", (lo,)).fetchone()[0] == 0
    assert index.postings_problem() is None
    for query in QUERIES[:5]:
        fts5, fast = exact_and_postings(index, query, 10, False, monkeypatch)
        assert fast == fts5 and all(b != book for b, _, _ in fast), query


class Counted(Progress):
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def add_total(self, n: float) -> None:
        self.calls.append(("total", n))

    def advance(self, n: float) -> None:
        self.calls.append(("advance", n))

    def close(self) -> None:
        self.calls.append(("close", 0))


def test_a_library_made_before_the_postings_searches_with_fts5_until_compacted(
    alice_copy: Path, monkeypatch
) -> None:
    import apsw

    conn = apsw.Connection(str(alice_copy / "library.sqlite"))
    written = sorted(conn.execute("SELECT term, lo, records FROM postings"))
    conn.execute("DROP TABLE postings; DELETE FROM meta WHERE key = 'postings'")  # as an older Folio left it
    conn.close()
    lib = Library(alice_copy)
    index = lib.index
    monkeypatch.setattr(index_postings, "POSTINGS_MIN_CHUNKS", 0)
    with index._reading() as conn:
        assert index._corpus(conn) is None  # no postings yet: FTS5 answers
        assert conn.execute("SELECT count(*) FROM postings").fetchone()[0] == 0
    before = [(h.chunk_id, h.score) for h in index.lexical("the Queen of Hearts", 10)]
    assert before and index.postings_problem() is None
    counted = Counted()
    with lib.writer():
        index.compact(counted)
    assert counted.calls == [("total", 1), ("advance", 1), ("close", 0)]  # one book, written once
    with index._reading() as conn:
        assert sorted(conn.execute("SELECT term, lo, records FROM postings")) == written
        assert index._corpus(conn) is not None
    assert [(h.chunk_id, h.score) for h in index.lexical("the Queen of Hearts", 10)] == before


def test_check_and_doctor_find_and_rewrite_postings_that_miss_a_book(alice_copy: Path) -> None:
    from folio.dataflows.doctor import examine

    lib = Library(alice_copy)
    index = lib.index
    with index._conn() as conn:
        conn.execute("DELETE FROM postings WHERE term = ?", (EVERY_CHUNK,))
    assert any("term postings of 1 books" in p for p in index.check())
    findings = examine(lib).findings
    assert any("term postings" in f.problem and f.repaired for f in findings)
    assert index.postings_problem() is None and index.check() == []


def test_bonus_phrases_are_looked_up_on_worker_connections_over_the_same_snapshot(
    fairy_copy: Library, monkeypatch
) -> None:
    """``_concurrently`` gives each call's result in order; while the calling thread is busy, a worker
    thread takes the next calls on its own connection; a worker that sees another generation (a book added
    or removed since the search began) takes none, and the calling thread does them all."""
    import threading
    import time

    index = fairy_copy.index
    monkeypatch.setattr(index_postings, "available_cores", lambda: 2)

    def call(i: int):
        def run(conn) -> tuple[int, str, int, int]:
            if i == 0:
                time.sleep(0.3)  # the calling thread is busy: the worker takes the others
            count = conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'wolf'").fetchone()[
                0
            ]
            return i, threading.current_thread().name, id(conn), count

        return run

    with index._reading() as conn:
        done = index._concurrently(conn, [call(i) for i in range(4)])
    assert [d[0] for d in done] == [0, 1, 2, 3] and len({d[3] for d in done}) == 1 and done[0][3] > 0
    assert done[0][1] == threading.current_thread().name
    assert all(d[1].startswith("folio-phrases") and d[2] != done[0][2] for d in done[1:])

    real = index._generation
    monkeypatch.setattr(
        index,
        "_generation",
        lambda c: real(c) + (1 if threading.current_thread().name.startswith("folio-phrases") else 0),
    )
    with index._reading() as conn:
        moved = index._concurrently(conn, [call(i) for i in range(4)])
    assert [d[0] for d in moved] == [0, 1, 2, 3]
    assert {d[1] for d in moved} == {threading.current_thread().name}  # the worker took none
