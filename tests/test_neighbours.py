"""Word neighbours beside the term postings (nodes/backends/neighbours.py): the chunks holding a bonus
phrase are found from one word's postings in numpy, and they are exactly the chunks FTS5's phrase query
finds; a search using them ranks as FTS5 does, to the last bit, without FTS5's phrase lookups."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.library import Library
from folio.nodes.backends import index_postings
from folio.nodes.backends.neighbours import (
    MARKER,
    NEAR,
    Anchor,
    anchor,
    ascending_unique,
    book_neighbours,
    chunk_neighbours,
    holding,
    occurrences,
)
from folio.nodes.backends.postings import tokens_postings, unpack
from tests import test_postings

QUERIES = (
    *test_postings.QUERIES,
    "once upon a time there was a king who had three daughters",  # a whole-query phrase over five tokens
    "What did the miller's daughter spin into gold for the king?",
    "zzzzqqq of the",
)


def test_a_chunks_neighbours_are_the_ids_two_before_and_two_after_each_token() -> None:
    rows = chunk_neighbours(np.array([5, 6, 7], dtype=NEAR))
    assert rows.tolist() == [[0, 0, 6, 7], [0, 5, 7, 0], [5, 6, 0, 0]]
    assert chunk_neighbours(np.array([9], dtype=NEAR)).tolist() == [[0, 0, 0, 0]]


def test_book_neighbours_follow_the_postings_order_and_skip_the_stop_words() -> None:
    """Golden case: two chunks given out of order; "the" is a stop word (no rows); each term's rows are
    its occurrences chunk by chunk (rowid order, as its postings' records), then by position."""
    chunks = [(9, ["wolf", "the", "wolf"]), (4, ["the", "wolf", "ate"])]
    ids = {"the": 1, "wolf": 2, "ate": 3}
    rows = book_neighbours(chunks, ids, {"the"})
    assert set(rows) == {"wolf", "ate", MARKER}
    wolf = np.frombuffer(rows["wolf"], dtype=NEAR).reshape(-1, 4).tolist()
    assert wolf == [[0, 1, 3, 0], [0, 0, 1, 2], [2, 1, 0, 0]]  # chunk 4, then chunk 9's two
    assert np.frombuffer(rows[MARKER], dtype=NEAR).tolist() == [2]
    records = unpack([tokens_postings(chunks)["wolf"]])
    assert records["rowid"].tolist() == [4, 9] and int(records["freq"].sum()) == len(wolf)


def test_the_anchor_is_the_rarest_word_that_covers_the_phrase() -> None:
    counts = {"whale": 40, "rose": 9, "sea": 500, "old": 70}
    assert anchor(["the", "whale", "rose"], counts, {"the"}) == Anchor(2, True)
    # a 6-token phrase: no token has the others within two of it; the rarest word, not exactly
    long = ["the", "whale", "rose", "out", "of", "sea"]
    assert anchor(long, counts, {"the", "out", "of"}) == Anchor(2, False)
    # five tokens: only the middle one covers them; "rose" (rarer) does not
    assert anchor(["rose", "x", "old", "y", "sea"], counts, set()) == Anchor(2, True)
    assert anchor(["of", "the"], counts, {"of", "the"}) is None  # only stop words
    assert anchor(["whale"], counts, set()) is None  # one token is no phrase
    assert anchor(["the", "narwhal"], counts, {"the"}) is None  # a word the search did not read


def test_holding_finds_the_chunks_where_the_phrase_stands_around_its_anchor() -> None:
    ids = {"of": 1, "the": 2, "sea": 3, "in": 4, "deep": 5}
    chunks = [(1, ["of", "the", "sea"]), (2, ["in", "the", "sea", "of", "the", "deep", "sea"])]
    rows = book_neighbours(chunks, ids, {"of", "the", "in"})
    sea = unpack([tokens_postings(chunks)["sea"]])

    found = occurrences(sea["rowid"], sea["freq"], rows["sea"])
    assert found.owners.tolist() == [1, 2, 2]

    def held(tokens: list[str], at: int) -> list[int]:
        return holding(found, at, tokens, ids).tolist()

    assert held(["of", "the", "sea"], 2) == [1]
    assert held(["the", "sea"], 1) == [1, 2]
    assert held(["the", "deep", "sea"], 2) == [2]
    assert held(["sea", "of"], 0) == [2]
    assert held(["the", "kraken", "sea"], 2) == []  # a word the library never held
    with pytest.raises(ValueError):
        occurrences(sea["rowid"], sea["freq"], rows["sea"][: 2 * NEAR.itemsize * 4])


@pytest.fixture(scope="module")
def fairy_copy(fairytale_library: Path, tmp_path_factory) -> Library:
    """A private copy of the FairytaleQA library (three real books), searched from its postings."""
    target = tmp_path_factory.mktemp("neighbours") / "library"
    shutil.copytree(fairytale_library, target)
    return Library(target)


def _fts5_holders(conn, tokens: list[str]) -> list[int]:
    expression = '"' + " ".join(tokens).replace('"', '""') + '"'
    sql = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid"
    return [r for (r,) in conn.execute(sql, (expression,))]


def test_the_chunks_found_from_the_neighbours_are_fts5s_phrase_matches(fairy_copy: Library) -> None:
    """Phrases of two to five tokens cut from the real books' chunks at random (and the same with one
    word changed, which mostly no chunk holds): the exact answers equal FTS5's phrase query, and a
    superset answer holds every FTS5 match."""
    from folio.nodes.backends.index_store import FTS_TOKENIZE
    from folio.nodes.backends.neighbours import skipped_terms
    from folio.nodes.backends.postings import fts5_tokenizer

    index = fairy_copy.index
    rng = random.Random(27)
    checked = exact = 0
    with index._reading() as conn:
        skipped = skipped_terms(index._meta(conn))
        assert skipped and "the" in skipped and "wolf" not in skipped
        tokenize = fts5_tokenizer(conn, FTS_TOKENIZE)
        texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY rowid")]
        words = [w for t in rng.sample(texts, 20) for w in tokenize(t)]
        for _ in range(150):
            size = rng.randint(2, 6)
            start = rng.randrange(len(words) - size)
            phrase = words[start : start + size]
            if rng.random() < 0.3:
                phrase[rng.randrange(size)] = rng.choice(words)
            held, rows_of = {}, index._term_rows(conn, None)
            for term in {t for t in phrase if t not in skipped}:
                read = rows_of("postings", term)
                held[term] = (unpack(r[1] for r in read), [int(r[0]) for r in read])
            records = {t: h[0] for t, h in held.items()}
            everyone = np.ones(len(texts) + 1, dtype=np.int64)  # no book removed: every rowid is a chunk
            near = index._near(
                conn, tokenize, (records, records, everyone), {t: h[1] for t, h in held.items()}, rows_of
            )
            assert near is not None
            answer = near(phrase)
            if answer is None:
                continue
            checked += 1
            fts5 = _fts5_holders(conn, phrase)
            if answer[1]:
                exact += 1
                assert answer[0].tolist() == fts5, phrase
            else:
                assert set(fts5) <= set(answer[0].tolist()), phrase
    assert checked >= 100 and exact >= 60


def test_a_search_with_the_neighbours_equals_fts5s_without_its_phrase_lookups(
    fairy_copy: Library, monkeypatch
) -> None:
    """The whole library, some books, each book's best: the same hits and float scores as FTS5's own
    statement; a bonus the neighbours answer exactly never reaches FTS5 (``_holders``); those they cannot
    ("ate" is "at" to the stemmer, a stop word: "the wolf ate the grandmother" has no exact anchor) do."""
    index = fairy_copy.index
    every = sorted(d["book_id"] for d in fairy_copy.descriptors())
    looked: list[str] = []
    exact: set[str] = set()
    holders, answered = index_postings.IndexPostings._holders, index_postings.near_bonus

    def spy(conn, expression, *args, **kwargs):
        looked.append(expression)
        return holders(conn, expression, *args, **kwargs)

    def spy_near(bonus, near):
        answer = answered(bonus, near)
        if answer is not None and answer[1]:
            exact.add(bonus.expression)
        return answer

    monkeypatch.setattr(index_postings.IndexPostings, "_holders", staticmethod(spy))
    monkeypatch.setattr(index_postings, "near_bonus", spy_near)
    for books in (None, every[:1], every[1:]):
        for query in QUERIES:
            for k, per_book in ((1, False), (10, False), (30, False), (1, True), (3, True)):
                fts5, fast = test_postings.exact_and_postings(index, query, k, per_book, monkeypatch, books)
                assert fast == fts5, (query, k, per_book, books)
    assert len(exact) >= 20 and not exact & set(looked), sorted(exact & set(looked))[:5]
    assert '"the wolf ate the grandmother"' in looked


def test_a_library_made_before_the_neighbours_gets_them_from_compact(alice_copy: Path, monkeypatch) -> None:
    import apsw

    conn = apsw.Connection(str(alice_copy / "library.sqlite"))
    written = sorted(conn.execute("SELECT term, lo, near FROM neighbours"))
    assert len(written) > 500
    conn.execute("DROP TABLE neighbours; DROP TABLE terms; DELETE FROM meta WHERE key = 'neighbours'")
    conn.close()
    lib = Library(alice_copy)
    index = lib.index
    monkeypatch.setattr(index_postings, "POSTINGS_MIN_CHUNKS", 0)
    before = [(h.chunk_id, h.score) for h in index.lexical("the Queen of Hearts said off with her head", 10)]
    assert before and index.postings_problem() is None
    with index._reading() as c:
        assert index._near(c, str.split, {}, {}, ("", [])) is None  # FTS5's phrases until compacted
    with lib.writer():
        index.compact()
    with index._reading() as c:
        assert sorted(c.execute("SELECT term, lo, near FROM neighbours")) == written
    assert [
        (h.chunk_id, h.score) for h in index.lexical("the Queen of Hearts said off with her head", 10)
    ] == before
    assert index.postings_problem() is None and index.check() == []


def test_removing_a_book_removes_its_neighbours_and_check_finds_a_missing_one(
    fairy_copy: Library, alice_copy: Path
) -> None:
    from folio.dataflows.doctor import examine

    lib = Library(alice_copy)
    index = lib.index
    with index._conn() as conn:
        conn.execute("DELETE FROM neighbours WHERE term = ?", (MARKER,))
    assert any("word neighbours of 1 books" in p for p in index.check())
    findings = examine(lib).findings
    assert any("word neighbours" in f.problem and f.repaired for f in findings)
    assert index.check() == []
    book = lib.book_ids()[0]
    with lib.writer():
        lib.remove(book)
    with index._reading() as conn:
        assert conn.execute("SELECT count(*) FROM neighbours").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM terms").fetchone()[0] > 1000  # ids are never reused


def test_ascending_unique_is_numpys_unique_in_one_pass_and_falls_back_out_of_order():
    rng = np.random.default_rng(48)
    for n in (0, 1, 2, 7, 5000):
        ascending = np.sort(rng.integers(0, max(1, n // 3), n)).astype(np.int64)
        assert np.array_equal(ascending_unique(ascending), np.unique(ascending))
        shuffled = rng.integers(0, 40, n).astype(np.int64)
        assert np.array_equal(ascending_unique(shuffled), np.unique(shuffled))
    assert ascending_unique(np.array([3, 3, 3, 9, 9, 12])).tolist() == [3, 9, 12]
