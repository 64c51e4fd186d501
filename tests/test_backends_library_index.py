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
from folio.nodes.backends import index_search
from folio.nodes.backends.index_search import (
    Bonus,
    _varint,
    bm25_idf,
    informative_terms,
    left_out_bound,
    merged_spans,
)
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


def test_informative_terms_leave_out_words_in_half_the_chunks_unless_the_rest_cannot_fill_k() -> None:
    terms = ('"time"', '"traveller"', '"future"', '"zyx"')
    hits = (133_190, 11_316, 11_370, 0)
    assert informative_terms(terms, hits, 247_434, 30) == ('"traveller"', '"future"')
    assert informative_terms(terms, (133_190, 20, 25, 0), 247_434, 30) == terms  # 25 < k: all
    assert informative_terms(('"time"', '"came"'), (200_000, 130_000), 247_434, 10) == ('"time"', '"came"')


def test_left_out_bound_counts_the_floor_of_each_word_and_bonuses_without_a_kept_word() -> None:
    phrase = Bonus('"he went away"', 1.0, (("he", "went", "away"),))
    run = Bonus('"then he went"', 0.25, (("then", "he", "went"),))
    assert left_out_bound(2, [phrase], ["away"], 8.0) == pytest.approx(2 * 2.2e-6)
    assert left_out_bound(1, [phrase, run], ["away"], 8.0) == pytest.approx(2.2e-6 + 8.0 * 0.25)
    either = Bonus('"a b" OR "went on"', 1.0, (("a", "away"), ("went", "on")))
    assert left_out_bound(1, [either], ["away"], 4.0) == pytest.approx(2.2e-6 + 4.0)


LEFT_OUT_QUERIES = (
    "then he went away and said nothing more",
    "said the little man to the old queen",
    "the little old man went away",
    "she went back to the little house",
    "he went away",
    "she went to the old queen",  # "went to the" holds no kept word: a left-out chunk could rank
    "he went to the little house",
    "so she went up to the door",
)


def test_a_large_library_search_leaving_out_words_without_idf_finds_the_same_hits(
    generated: Library, monkeypatch
) -> None:
    """Words in half the chunks ("little": 32 of 40, "went": 24) are left out of a large library's
    search; the hits are the exact search's, scores within the left-out words' floor (near-ties may
    swap), and a search whose k-th hit a left-out chunk could beat runs again with every word."""
    index = generated.index
    matched: list[int] = []
    rows = index_search.IndexSearch._lexical_rows

    def counting(self, conn, terms, *args):
        matched.append(len(terms))
        return rows(self, conn, terms, *args)

    monkeypatch.setattr(index_search.IndexSearch, "_lexical_rows", counting)
    dropped = again = 0
    for query in LEFT_OUT_QUERIES:
        for k in (3, 5, 10):
            monkeypatch.setattr(index_search, "LARGE_LIBRARY_CHUNKS", 10**9)
            exact = index.lexical(query, k)
            monkeypatch.setattr(index_search, "LARGE_LIBRARY_CHUNKS", 1)
            matched.clear()
            fast = index.lexical(query, k)
            dropped += matched[0] < len(index_search.fts_match_expression(query).split(" OR "))
            again += len(matched) == 2
            assert [h.score for h in fast] == pytest.approx([h.score for h in exact], abs=1e-5), query
            boundary = exact[-1].score
            assert {h.chunk_id for h in fast if h.score > boundary + 1e-5} == {
                h.chunk_id for h in exact if h.score > boundary + 1e-5
            }, query
    assert dropped >= 10  # most of these searches did leave a word out
    assert again >= 1, "no search ran again with every word"


def test_only_the_k_best_by_bm25_and_chunks_holding_a_bonus_phrase_are_scored(generated: Library) -> None:
    """The whole-library ranking (bonuses applied to the k best by bm25 and the chunks holding a bonus
    phrase) equals every chunk scored: the per-book ranking of one-chunk books, cut to k."""
    index = generated.index
    for query in (*QUERIES, *LEFT_OUT_QUERIES, "the old woman said to the wolf"):
        every = index.lexical(query, 1, per_book=True)  # each book is one chunk: all matches, all scored
        for k in (1, 3, 10):
            assert [h.chunk_id for h in index.lexical(query, k)] == [h.chunk_id for h in every[:k]], query


def test_merged_spans_join_overlapping_and_adjacent_ranges_then_the_closest() -> None:
    assert merged_spans([(10, 20), (1, 5), (6, 8), (15, 30)]) == ((1, 8), (10, 30))
    assert merged_spans([(1, 2), (10, 12), (14, 20), (100, 101)], limit=2) == ((1, 20), (100, 101))
    assert merged_spans([(5, 9)], limit=1) == ((5, 9),)
    assert merged_spans([]) == ()


def test_a_scoped_search_walks_only_its_books_rowid_spans_and_finds_the_same_hits(
    generated: Library, monkeypatch
) -> None:
    """A search of some books narrows FTS5 to the rowid spans of their chunks (at 2 M windows one
    book's search went from 415 to 37 ms p50); the chunk filter still decides, so the hits are those of
    the unnarrowed search."""
    index = generated.index
    every = sorted(d["book_id"] for d in generated.descriptors())
    with index._reading() as conn:
        rowids = {
            b: [int(r) for r in rs.split(",")]
            for b, rs in conn.execute("SELECT book_id, group_concat(rowid) FROM chunks GROUP BY book_id")
        }
        assert index._spans(conn, [every[7]]) == ((min(rowids[every[7]]), max(rowids[every[7]])),)
        two = index._spans(conn, [every[3], every[30]])
        assert len(two) == 2 and {r for lo, hi in two for r in range(lo, hi + 1)} == {
            *rowids[every[3]],
            *rowids[every[30]],
        }
        assert index._spans(conn, None) == ()
    scopes = [[every[7]], [every[3], every[30]], every[10:20], every[::2]]
    narrowed = {
        (query, i): index.lexical(query, 5, scope)
        for query in (*QUERIES, *LEFT_OUT_QUERIES)
        for i, scope in enumerate(scopes)
    }
    monkeypatch.setattr(index_search.IndexSearch, "_spans", lambda self, conn, book_ids: ())
    matched = 0
    for (query, i), hits in narrowed.items():
        plain = index.lexical(query, 5, scopes[i])
        assert [(h.chunk_id, h.score) for h in hits] == [(h.chunk_id, h.score) for h in plain], (query, i)
        matched += bool(hits)
    assert matched >= 10


def test_a_search_of_thousands_of_books_passes_its_scope_as_one_parameter(
    generated: Library, monkeypatch
) -> None:
    """A search routed to many books repeats its scope per rowid span and per phrase: at 2 M windows, an
    ask routed to hundreds of books failed with "too many SQL variables". Beyond ``SCOPE_LIST_MAX`` the
    books are one JSON parameter, with the same hits as the list of placeholders."""
    from folio.nodes.backends import index_store

    index = generated.index
    every = sorted(d["book_id"] for d in generated.descriptors())
    many = [*every[::2], *(f"not-a-book-{i}" for i in range(3000))]
    query = "the old woman said to the wolf at the well in the snow"
    found = index.lexical(query, 10, many)
    assert found and {h.book_id for h in found} <= set(every[::2])
    monkeypatch.setattr(index_store, "SCOPE_LIST_MAX", 10**6)  # placeholders for each id, as before
    assert [(h.chunk_id, h.score) for h in index.lexical(query, 10, every[::2])] == [
        (h.chunk_id, h.score) for h in found
    ]
    with pytest.raises(apsw.SQLError, match="too many SQL variables"):
        index.lexical(query, 10, many)
