"""Phrases and proximity in lexical search, and routing by names: the text helpers (golden cases), a
real FTS5 table fed hostile input, and ranking and routing over real books."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.dataflows.asking import _library
from folio.nodes.core.text import (
    FTS_MAX_PHRASE_TOKENS,
    FTS_MAX_SHINGLES,
    fts_match_expression,
    fts_phrase_expression,
    fts_phrases,
    fts_shingles,
    fts_tokens,
    words,
)
from folio.nodes.core.types import BookInfo
from folio.nodes.query.routing import _clause_names, _deterministic, _with_names
from folio.nodes.search.retrieval import lexical_hits, lexical_search

# --- text helpers ---------------------------------------------------------------------------------------


def test_fts_tokens_cut_at_apostrophes_like_the_index():
    assert fts_tokens("We’re all mad here, Rumpelstiltskin's!") == [
        "we",
        "re",
        "all",
        "mad",
        "here",
        "rumpelstiltskin",
        "s",
    ]


def test_whole_query_is_a_phrase_stop_words_included():
    assert fts_phrases("Off with her head!") == (("off", "with", "her", "head"),)
    assert fts_phrases("Call me Ishmael.") == (("call", "me", "ishmael"),)


def test_a_single_word_is_no_phrase():
    assert fts_phrases("Ishmael") == ()
    assert fts_phrases("?!") == ()


@pytest.mark.parametrize(
    "query",
    [
        'Who said "we\'re all mad here"?',
        "Who said “we’re all mad here”?",
        "Who said ‘we’re all mad here’?",
        "Who said 'we're all mad here'?",
    ],
)
def test_quoted_segments_are_phrases_in_every_quote_style(query):
    assert fts_phrases(query)[1] == ("we", "re", "all", "mad", "here")


def test_possessive_and_plural_apostrophes_open_no_quote():
    assert fts_phrases("Ahab's leg and the men's 'oars'") == (
        ("ahab", "s", "leg", "and", "the", "men", "s", "oars"),
    )
    assert len(fts_phrases("the Beatles' song 'Let It Be' and more")) == 2


def test_a_long_query_is_no_verbatim_line():
    query = " ".join(["whale"] * (FTS_MAX_PHRASE_TOKENS + 1))
    assert fts_phrases(query) == ()


def test_shingles_are_three_word_runs_holding_a_content_word():
    assert fts_shingles("Which story has the line call me Ishmael") == (
        ("which", "story", "has"),
        ("story", "has", "the"),
        ("has", "the", "line"),
        ("the", "line", "call"),
        ("line", "call", "me"),
        ("call", "me", "ishmael"),
    )
    assert fts_shingles("Why did the king cry") == (("did", "the", "king"), ("the", "king", "cry"))
    assert fts_shingles("Call me Ishmael") == ()  # the whole-query phrase covers it


def test_shingles_are_capped():
    assert len(fts_shingles(" ".join(f"word{i}" for i in range(100)))) == FTS_MAX_SHINGLES


def test_phrase_expression_quotes_each_phrase():
    assert fts_phrase_expression((("off", "with", "her", "head"), ("mad", "here"))) == (
        '"off with her head" OR "mad here"'
    )
    assert fts_phrase_expression(()) is None


HOSTILE = [
    '"',
    '"unbalanced quote here',
    'NEAR("a" "b", 2) OR (c',
    'NEAR( whale "ahab',
    "whale* -ahab AND NOT ship OR",
    "col:text ^start ''",
    "\x00\x01\x1b[31m red \x7f control\tchars\n",
    '""""""',
    "“ ” ‘ ’ '' \"\" ' \"",
    "ahab's 'men's' \"boat's\" ‘ship’s’",
    "a" * 10_000,
    ("the whale NEAR ahab * - AND OR NOT ( ) \" ' " * 500)[:10_000],
    "émile Zoë ß ﬁsh 北京 ١٢٣",
]


@pytest.fixture(scope="module")
def fts_table():
    """An in-memory FTS5 table with the lexical index's tokenizer and two real lines."""
    import apsw

    conn = apsw.Connection(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2');"
        "INSERT INTO t VALUES ('Call me Ishmael. Some years ago, never mind how long precisely');"
        "INSERT INTO t VALUES ('‘Off with her head!’ the Queen shouted at the top of her voice.');"
    )
    return conn


@pytest.mark.parametrize("query", HOSTILE)
def test_no_phrase_or_shingle_expression_is_an_fts5_syntax_error(fts_table, query):
    expressions = [fts_match_expression(query), fts_phrase_expression(fts_phrases(query))]
    expressions += [fts_phrase_expression((s,)) for s in fts_shingles(query)]
    for expression in filter(None, expressions):
        list(fts_table.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)))


def test_the_index_finds_a_phrase_across_punctuation_and_curly_quotes(fts_table):
    expression = fts_phrase_expression(fts_phrases("off with her head"))
    assert [r[0] for r in fts_table.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))] == [2]


# --- ranking over real books ------------------------------------------------------------------------------


def _stores(*libraries: Path) -> tuple:
    return tuple(s for lib in libraries for s in _library(lib)[1].values())


def _rank_of_phrase(hits, phrase: str) -> int | None:
    target = " ".join(words(phrase))
    return next((i + 1 for i, h in enumerate(hits) if target in " ".join(words(h.text))), None)


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        ("Off with her head", "off with her head"),  # every word but "head" a stop word
        ("we're all mad here", "we're all mad here"),  # Grimm's "mad" chunks outranked it
        ('Who said "we’re all mad here"?', "we're all mad here"),
        ("Rapunzel, Rapunzel! let down your hair", "let down your hair"),
        ("What will you give me if I spin all this straw into gold", "straw into gold"),
    ],
)
def test_a_verbatim_line_ranks_its_chunk_first_among_several_books(
    alice_library, fairytale_library, query, phrase
):
    hits = lexical_hits(lexical_search(query, _stores(alice_library, fairytale_library), None, 10))
    assert _rank_of_phrase(hits, phrase) == 1, [h.text[:60] for h in hits[:3]]


def test_call_me_ishmael_ranks_the_first_chapter_first(moby_library):
    hits = lexical_hits(lexical_search("Call me Ishmael", _stores(moby_library), None, 10))
    assert hits[0].text.lstrip().startswith("Call me Ishmael"), hits[0].text[:80]


def test_the_speckled_band_ranks_a_chunk_holding_it_first(sherlock_library):
    hits = lexical_hits(lexical_search("the speckled band", _stores(sherlock_library), None, 10))
    assert _rank_of_phrase(hits, "the speckled band") == 1


def test_hostile_queries_never_raise_in_the_store(alice_library):
    (store,) = _stores(alice_library)
    for query in HOSTILE:
        assert isinstance(store.lexical(query, 5), list)
        assert isinstance(store.holds_phrase(query), bool)


def test_chapter_filter_still_applies_with_phrase_bonuses(alice_library):
    (store,) = _stores(alice_library)
    chapter = store.lexical("Off with her head", 1)[0].chapter_id
    others = [c for c in store.titles if c != chapter]
    assert all(h.chapter_id != chapter for h in store.lexical("Off with her head", 10, others))


# --- routing by names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "names"),
    [
        ("How did Rumpelstiltskin's name get discovered", ("Rumpelstiltskin",)),
        ("How did Rumpelstiltskin’s name get discovered", ("Rumpelstiltskin",)),
        ("What happened to Holmes' violin", ("Holmes",)),
        ("Why did the Queen of Hearts shout", ("Queen", "Hearts", "Queen of Hearts")),
        (
            "Where is the King of the Golden Mountain",
            ("King", "Golden Mountain", "King of the Golden Mountain"),
        ),
        ("Describe the wolf", ()),
        ("What did Ahab's leg look like", ("Ahab",)),
    ],
)
def test_clause_names_strip_possessives_and_join_of(clause, names):
    assert _clause_names(clause) == names


def test_a_name_held_by_one_book_decides_and_caps_the_others():
    signals = [("grimm", 0.5, "50%"), ("time", 0.75, "75%"), ("alice", 0.25, "25%")]
    held = {"grimm": frozenset({"Rumpelstiltskin"}), "time": frozenset(), "alice": frozenset()}
    out = dict((b, s) for b, s, _ in _with_names(signals, held, {"grimm": "Grimm"}))
    assert out == {"grimm": 0.8, "time": 0.25, "alice": 0.25}


def test_a_definitional_question_is_not_raised_by_a_place_name():
    signals = [("sherlock", 0.5, "capped"), ("alice", 0.2, "")]
    held = {"sherlock": frozenset({"France"}), "alice": frozenset()}
    out = dict((b, s) for b, s, _ in _with_names(signals, held, {}, definitional=True))
    assert out == {"sherlock": 0.5, "alice": 0.2}


def test_a_name_held_by_several_books_changes_nothing():
    signals = [("a", 0.5, ""), ("b", 0.75, "")]
    held = {"a": frozenset({"Queen"}), "b": frozenset({"Queen"})}
    assert _with_names(signals, held, {}) == signals


def test_names_no_book_holds_send_the_clause_out_of_the_library():
    signals = [("alice", 0.8, "80%"), ("moby", 0.6, "60%"), ("sherlock", 1.0, "names the title")]
    held = {"alice": frozenset(), "moby": frozenset(), "sherlock": frozenset()}
    out = _with_names(signals, held, {}, names=("Beatles",))
    assert dict((b, s) for b, s, _ in out) == {"alice": 0.25, "moby": 0.25, "sherlock": 1.0}
    assert "no book holds Beatles" in out[0][2]
    # without names, or with a name some book holds, the signals stand
    assert _with_names(signals, held, {}) == signals


def test_beatles_question_is_routed_away_from_books_that_share_its_words(alice_library, fairytale_library):
    clause = "Why did the Beatles stop performing live concerts?"
    decision = _route((alice_library, fairytale_library), clause)
    assert decision.route == "NOT_BOOK", decision.reason


def test_words_of_a_unique_name_do_not_keep_another_book_in():
    signals = [("alice", 0.67, ""), ("moby", 0.67, ""), ("sherlock", 1.0, "names the title")]
    held = {
        "alice": frozenset({"Queen", "Hearts", "Queen of Hearts"}),
        "moby": frozenset({"Queen", "Hearts"}),
        "sherlock": frozenset({"Queen"}),
    }
    out = dict((b, s) for b, s, _ in _with_names(signals, held, {}))
    assert out == {"alice": 0.8, "moby": 0.25, "sherlock": 1.0}  # a book named by title stays


def _route(libraries: tuple[Path, ...], clause: str):
    stores, maps = {}, {}
    for lib in libraries:
        _, s, m = _library(lib)
        stores.update(s)
        maps.update(m)
    catalog = [
        BookInfo(b, s.descriptor.get("title", ""), s.descriptor.get("author", ""), "")
        for b, s in stores.items()
    ]
    return _deterministic(clause, catalog, stores, maps)


@pytest.mark.parametrize(
    ("clause", "book"),
    [
        ("How did Rumpelstiltskin's name get discovered", "grimm"),
        ("How did Rumpelstiltskin’s name get discovered", "grimm"),
        ("What did Hansel and Grethel find in the forest", "grimm"),
        ("Why did the Queen of Hearts shout", "alice"),
        ("Who is the Cheshire Cat", "alice"),
        ("Why was Holmes’s client afraid of the speckled band", "sherlock"),
        ("What did Irene Adler's photograph show", "sherlock"),
    ],
)
def test_a_name_routes_to_the_book_that_holds_it(
    alice_library, fairytale_library, sherlock_library, clause, book
):
    decision = _route((alice_library, fairytale_library, sherlock_library), clause)
    assert decision.route == "BOOK" and len(decision.book_ids) == 1, decision
    assert book in decision.book_ids[0], decision


def test_ahab_routes_to_moby_dick_beside_other_books(alice_library, fairytale_library, moby_library):
    for clause in ("What did Ahab's leg look like", "What did Ahab’s crew think of him"):
        decision = _route((alice_library, fairytale_library, moby_library), clause)
        assert decision.route == "BOOK" and decision.book_ids[0].startswith("moby-dick"), decision
