"""Library-wide lexical scoring (nodes/backends/library_index.py): FTS5's bm25 for the whole library, the
same formula over the statistics of the books searched for a scope of some books."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import apsw
import pytest

from bench.scaling import generated_library, small_books
from folio.dataflows.library import Library
from folio.nodes.backends.index_search import _varint, bm25_idf
from folio.nodes.backends.index_store import scoped_bm25
from tests.conftest import DATA_DIR

QUERIES = (
    "the old woman and the wolf",
    "a golden key in the snow",
    "the king's daughter at the well",
    "Peter ran under the gooseberry net",
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Library:
    return generated_library(tmp_path_factory.mktemp("generated") / "lib", small_books(DATA_DIR, 40, 300))


def test_varint_reads_sqlite_variable_length_integers() -> None:
    assert _varint(bytes([0x05])) == 5
    assert _varint(bytes([0x81, 0x00])) == 128
    assert _varint(bytes([0x82, 0xB5, 0x11])) == (2 << 14) | (0x35 << 7) | 0x11
    assert _varint(bytes([0xFF] * 8 + [0x01])) == (2**56 - 1) << 8 | 1


def test_bm25_idf_is_fts5s_and_never_below_its_floor() -> None:
    assert bm25_idf(100, 1) == pytest.approx(math.log(99.5 / 1.5))
    assert bm25_idf(10, 9) == 1e-6  # a word in most rows: FTS5's floor, not a negative weight


def test_scoped_bm25_is_fts5s_own_bm25_with_the_tables_statistics() -> None:
    conn = apsw.Connection(":memory:")
    conn.register_fts5_function("scoped_bm25", scoped_bm25)
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text)")
    texts = ["the whale and the whale ship", "a ship at sea", "the sea the sea the sea", "a white whale"]
    conn.executemany("INSERT INTO f VALUES (?)", [(t,) for t in texts])
    avgdl = sum(len(t.split()) for t in texts) / len(texts)
    idfs = [bm25_idf(4, 2), bm25_idf(4, 2)]  # "whale" and "sea" are each in two rows
    rows = list(
        conn.execute(
            "SELECT -bm25(f), scoped_bm25(f, ?, ?, ?) FROM f WHERE f MATCH ?",
            (avgdl, *idfs, '"whale" OR "sea"'),
        )
    )
    assert len(rows) == 4
    for builtin, scoped in rows:
        assert scoped == pytest.approx(builtin, rel=1e-9)


def test_every_book_named_ranks_exactly_as_the_whole_library(generated: Library) -> None:
    index = generated.index
    every = [d["book_id"] for d in generated.descriptors()]
    for query in QUERIES:
        whole = index.lexical(query, 10)
        named = index.lexical(query, 10, book_ids=every)
        assert whole, query
        assert [h.chunk_id for h in named] == [h.chunk_id for h in whole]
        assert [h.score for h in named] == pytest.approx([h.score for h in whole], rel=1e-9)


def test_a_scope_keeps_only_its_books_and_chapters(generated: Library) -> None:
    index = generated.index
    books = [d["book_id"] for d in generated.descriptors()][:5]
    hits = index.lexical("the", 50, book_ids=books)
    assert hits and {h.book_id for h in hits} <= set(books)
    chapter = generated.store(books[0]).chunks_in()[0].chapter_id
    assert {h.chapter_id for h in index.lexical("the", 50, book_ids=books, chapter_ids=[chapter])} == {
        chapter
    }
    per_book = index.lexical("the", 2, per_book=True)
    counts: dict[str, int] = {}
    for h in per_book:
        counts[h.book_id] = counts.get(h.book_id, 0) + 1
    assert len(counts) > 2 and max(counts.values()) <= 2


def test_keeping_some_chapters_filters_the_books_ranking_without_changing_its_scores(
    generated: Library,
) -> None:
    index = generated.index
    books = [d["book_id"] for d in generated.descriptors()][:8]
    chapters = {generated.store(b).chunks_in()[0].chapter_id for b in books[:3]}
    for query in QUERIES:
        kept = index.lexical(query, 10, book_ids=books, chapter_ids=chapters)
        filtered = [h for h in index.lexical(query, 100, book_ids=books) if h.chapter_id in chapters][:10]
        assert [h.chunk_id for h in kept] == [h.chunk_id for h in filtered], query
        assert [h.score for h in kept] == pytest.approx([h.score for h in filtered], rel=1e-9)


def test_a_book_searched_alone_ranks_as_in_a_library_of_its_own(
    fairytale_library: Path, tmp_path: Path
) -> None:
    whole = Library(fairytale_library)
    alone_path = tmp_path / "alone"
    shutil.copytree(fairytale_library, alone_path)
    alone = Library(alone_path)
    grimm = next(d["book_id"] for d in whole.descriptors() if "grimm" in d["book_id"])
    with alone.writer():
        for book_id in alone.book_ids():
            if book_id != grimm:
                alone.remove(book_id)
    assert alone.book_ids() == [grimm]
    for query in QUERIES:
        scoped = whole.index.lexical(query, 10, book_ids=[grimm])
        own = alone.index.lexical(query, 10)
        assert scoped, query
        assert [h.chunk_id for h in scoped] == [h.chunk_id for h in own]
        assert [h.score for h in scoped] == pytest.approx([h.score for h in own], rel=1e-9)
    alone.close()
