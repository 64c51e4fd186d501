"""Kiwix query stage: search terms, relaxation, suggestions, pooling and book selection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from folio.dataflows.asking import ask
from folio.dataflows.config import load_config
from folio.dataflows.kiwix_query import kiwix_backend, kiwix_config, kiwix_driver
from folio.dataflows.registry import settings_inputs
from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.kiwix_types import Candidate, KiwixBook, KiwixCatalog
from folio.nodes.core.text import named_phrases
from folio.nodes.core.types import FolioError
from folio.nodes.kiwix.candidates import (
    FULL_QUERY_MIN_HITS,
    _best_passage,
    _clean_terms,
    _edition,
    _key_phrases,
    _newest_editions,
    _older_editions,
    _pool,
    _query_excerpt,
    _rarest_terms,
    _relaxed_queries,
    _search_book,
    _suggest_terms,
    _valid_llm_books,
    book_searches,
    kiwix_errors,
)
from tests.conftest import ZIMS
from tests.servers import Reply, ScriptedLLMServer, start_kiwix_serve
from tests.test_backends_zim import _damaged_zim

WIKI = "wikipedia_en_100_mini_2022-10"
RAY = "wikipedia_en_ray_charles_mini_2020-03"
RAY_OLD = "wikipedia_en_ray_charles_novid_2018-10"
TONE = "tonedear.com_en_2024-09"
ALL_ZIMS = sorted(str(p) for p in ZIMS.glob("*.zim"))


@pytest.fixture(scope="module")
def zim_backend() -> Iterator[ZimBackend]:
    with ZimBackend(ALL_ZIMS) as backend:
        yield backend


@pytest.fixture(scope="module")
def kiwix_server() -> Iterator[Any]:
    server = start_kiwix_serve([ZIMS / f"{WIKI}.zim", ZIMS / f"{TONE}.zim"])
    try:
        yield server
    finally:
        server.stop()


def run(config: dict[str, Any], query: str, tmp_path: Path, outputs: list[str]) -> dict[str, Any]:
    dr = kiwix_driver(config)
    backend = kiwix_backend(dr, config)
    inputs = {**settings_inputs(dr, config), "kiwix_query": query, "cache_dir": str(tmp_path)}
    try:
        return dr.execute(outputs, inputs=inputs, overrides={"kiwix_backend": backend})
    finally:
        backend.close()


# --- search terms ------------------------------------------------------------------------------------


def test_clean_terms_drop_stop_words_possessives_and_punctuation() -> None:
    assert _clean_terms("Why did the Beatles stop touring?") == ("beatles", "stop", "touring")
    assert _clean_terms("What are the raccoon's most distinctive features?") == (
        "raccoon",
        "distinctive",
        "features",
    )
    assert _clean_terms("Where was Ray Charles' first hit recorded?!") == (
        "ray",
        "charles",
        "first",
        "hit",
        "recorded",
    )


def test_clean_terms_keep_numbers_and_drop_repeats() -> None:
    assert _clean_terms("Apollo 13: what went wrong on Apollo 13?") == ("apollo", "13", "went", "wrong")


def test_clean_terms_fall_back_to_every_word_for_an_all_stop_word_question() -> None:
    assert _clean_terms("What is it?") == ("what", "is", "it")


def test_named_phrases_are_capitalised_runs_without_the_question_word() -> None:
    assert named_phrases("Which river was the Hoover Dam built on?") == ("Hoover Dam",)
    assert named_phrases("What went wrong during the Apollo 13 mission?") == ("Apollo 13",)
    assert named_phrases("Why did the Beatles stop touring?") == ("Beatles",)
    assert named_phrases("where do emus live") == ()


def test_suggest_terms_add_the_stem_of_a_one_word_query() -> None:
    assert _suggest_terms("what are galaxies", ("galaxies",)) == ("galaxy",)
    assert _suggest_terms("Who wrote The Communist Manifesto?", ("wrote", "communist", "manifesto")) == (
        "Communist Manifesto",
    )


def test_relaxed_queries_drop_the_most_common_terms_first() -> None:
    counts = {"emus": 1, "live": 20, "wild": 7}
    assert _relaxed_queries(["emus", "live", "wild"], counts) == ["emus wild"]
    assert _relaxed_queries(["a1", "b22", "c333", "d4444"], {"a1": 5, "b22": 9, "c333": 1, "d4444": 2}) == [
        "a1 c333 d4444",
        "c333 d4444",
    ]


def test_key_phrases_are_adjacent_pairs() -> None:
    assert _key_phrases(["natural", "selection", "theory"]) == ["natural selection", "selection theory"]


def test_rarest_terms_skip_terms_the_book_lacks() -> None:
    assert _rarest_terms(["emus", "live", "wild"], {"emus": 0, "live": 20, "wild": 7}) == ["wild", "live"]


def test_pool_keeps_the_first_of_each_book_and_path() -> None:
    a = Candidate("b", "A/X", "X", "", "u1", "search")
    b = Candidate("b", "A/X", "X", "", "u1", "suggest")
    c = Candidate("c", "A/X", "X", "", "u2", "search")
    assert _pool([[a], [b, c]]) == (a, c)


# --- query excerpts --------------------------------------------------------------------------------


def test_best_passage_is_the_window_with_the_most_distinct_query_words() -> None:
    text = "alpha beta gamma. " * 5 + "the emu lives in the wild outback. " + "delta epsilon. " * 5
    start, passage = _best_passage(text, ("emus", "wild"), max_chars=40)
    assert passage.startswith("the emu lives in the wild")
    assert text[start:].startswith(passage.split()[0])
    assert len(passage) <= 40


def test_best_passage_prefers_more_distinct_words_over_repeats() -> None:
    text = "wild wild wild wild wild. " + "filler words here. " * 4 + "emu in the wild"
    _, passage = _best_passage(text, ("emu", "wild"), max_chars=24)
    assert "emu" in passage and "wild" in passage


def test_best_passage_ties_go_to_the_earliest_window() -> None:
    _, passage = _best_passage("emu one two three four five six seven emu eight", ("emu",), max_chars=10)
    assert passage.startswith("emu one")


def test_best_passage_without_query_words_is_the_start_of_the_text() -> None:
    assert _best_passage("Nothing relevant here at all.", ("emu",), max_chars=12) == (0, "Nothing")


def test_best_passage_survives_a_word_longer_than_the_window() -> None:
    text = "x" * 50 + " emu wild"
    _, passage = _best_passage(text, ("emu", "wild"), max_chars=20)
    assert passage == "emu wild"


def test_query_excerpt_keeps_the_lead_when_the_best_passage_is_in_it() -> None:
    lead = "The emu is a large bird that lives in the wild."
    assert _query_excerpt(lead, lead + " Other text follows here.", ("emu", "wild")) == lead


def test_query_excerpt_appends_the_passage_found_outside_the_lead() -> None:
    lead = "The emu is a large flightless bird."
    text = lead + " " + "Filler sentence. " * 40 + "Emus live in the wild in Australia."
    excerpt = _query_excerpt(lead, text, ("emus", "live", "wild"))
    assert excerpt.startswith(lead + " … ")
    assert "Emus live in the wild in Australia." in excerpt


def test_darwin_excerpt_gains_natural_selection_from_the_article_body(zim_backend: ZimBackend) -> None:
    darwin = next(c for c in zim_backend.search(WIKI, "charles darwin", 5) if c.path == "A/Charles_Darwin")
    terms = _clean_terms("Who proposed the theory of natural selection?")
    assert "natural selection" not in darwin.excerpt  # the lead excerpt alone lacks it
    excerpt = _query_excerpt(darwin.excerpt, zim_backend.article(WIKI, darwin.path).text, terms)
    assert excerpt.startswith(darwin.excerpt) and "natural selection" in excerpt


def test_pooled_candidates_carry_query_excerpts(zim_backend: ZimBackend) -> None:
    terms = _clean_terms("Who proposed the theory of natural selection?")
    found = _search_book(zim_backend, WIKI, terms, ())
    darwin = next(c for c in found.candidates if c.path == "A/Charles_Darwin")
    assert "natural selection" in darwin.excerpt


# --- editions ----------------------------------------------------------------------------------------


def test_edition_strips_flavour_and_date() -> None:
    assert _edition(RAY) == ("wikipedia_en_ray_charles", "2020-03")
    assert _edition(RAY_OLD) == ("wikipedia_en_ray_charles", "2018-10")
    assert _edition("tonedear.com_en_2024-09") == ("tonedear.com_en", "2024-09")
    assert _edition("corrupt") is None


def book(name: str) -> KiwixBook:
    return KiwixBook(name, name, "eng", "", 1, True, f"/{name}.zim")


def test_only_the_newest_edition_of_a_book_is_searched() -> None:
    kept, superseded = _newest_editions([book(RAY_OLD), book(WIKI), book(RAY), book("notes")])
    assert [b.name for b in kept] == [WIKI, RAY, "notes"]
    assert superseded == ((RAY_OLD, RAY),)


def test_different_books_with_the_same_date_are_both_kept() -> None:
    kept, superseded = _newest_editions([book("wikipedia_en_a_mini_2020-03"), book("wikipedia_en_b_2020-03")])
    assert len(kept) == 2 and superseded == ()


def test_both_ray_charles_editions_loaded_searches_only_the_newest(tmp_path: Path) -> None:
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), zim_paths=ALL_ZIMS)
    out = run(cfg, "Why did Ray Charles lose his sight?", tmp_path, ["superseded_books", "book_searches"])
    assert out["superseded_books"] == ((RAY_OLD, RAY),)
    assert RAY_OLD not in {s.book for s in out["book_searches"]}


def test_an_older_edition_is_searched_where_the_newest_finds_nothing(tmp_path: Path) -> None:
    # the 2020 "mini" edition holds only each article's lead: no article says "married"; before, the
    # 2018 "novid" edition it superseded was never searched and the question found nothing
    question = "Who was Ray Charles married to?"
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), zim_paths=ALL_ZIMS)
    out = run(cfg, question, tmp_path, ["book_searches", "kiwix_result"])
    by_book = {s.book: s for s in out["book_searches"]}
    assert not by_book[RAY].candidates and by_book[RAY_OLD].candidates
    result = out["kiwix_result"]
    assert result.selected_books[0] == RAY_OLD and RAY_OLD in result.searched_books
    assert result.superseded_books == ()  # it was searched
    # what `folio ask` answers from it (an empty library: the archives alone)
    answer = ask(question, library=tmp_path / "lib", zim_paths=ALL_ZIMS, config={"llm": "none"})
    assert "His first marriage was to Eileen Williams Robinson" in answer.answer
    assert answer.citations[0].zim == RAY_OLD and answer.citations[0].path == "A/Ray_Charles.html"


def test_a_damaged_newest_edition_does_not_hide_an_intact_older_one(tmp_path: Path) -> None:
    # a copy of the novid archive dated a year later, its first compressed cluster damaged: its search
    # still lists the Ray Charles article but cannot read it. Before, the intact 2018 edition it
    # superseded was never searched, no error was shown, and ask answered from "What'd I Say" (Jerry Lee
    # Lewis "married his 13-year-old cousin")
    question = "Who was Ray Charles married to?"
    newer = "wikipedia_en_ray_charles_novid_2019-10"
    zims = [str(_damaged_zim(tmp_path, newer, "middle", source=RAY_OLD)), str(ZIMS / f"{RAY_OLD}.zim")]
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), zim_paths=zims)
    out = run(cfg, question, tmp_path, ["book_searches", "kiwix_result"])
    by_book = {s.book: s for s in out["book_searches"]}
    assert by_book[newer].candidates and not by_book[newer].error  # the readable articles still count
    older_paths = {c.path for c in by_book[RAY_OLD].candidates}
    assert "A/Ray_Charles.html" in older_paths
    assert not older_paths & {c.path for c in by_book[newer].candidates}  # each article once
    result = out["kiwix_result"]
    assert result.selected_books[0] == RAY_OLD and RAY_OLD in result.searched_books
    assert [(book, "damaged ZIM archive" in why) for book, why in result.errors] == [(newer, True)]
    answer = ask(question, library=tmp_path / "lib", zim_paths=zims, config={"llm": "none"})
    assert "His first marriage was to Eileen Williams Robinson" in answer.answer
    assert answer.citations[0].zim == RAY_OLD and answer.citations[0].path == "A/Ray_Charles.html"
    assert any(newer in note and "damaged ZIM archive" in note for note in answer.notes), answer.notes


class _EditionsBackend:
    """A scripted backend of two editions: ``failing`` raises on every search; ``damaged`` lists what its
    search met but could not read; every article reads as its title."""

    def __init__(self, found: dict[str, tuple[str, ...]], failing: str = "", damaged: str = "") -> None:
        self.found, self.failing = found, failing
        self.damaged = {damaged: "damaged ZIM archive (test)"} if damaged else {}

    def search(self, book: str, query: str, limit: int = 20) -> tuple[Candidate, ...]:
        if book == self.failing:
            raise FolioError(book, "full-text search failed (test)")
        return tuple(Candidate(book, p, p, p, f"zim://{book}/{p}") for p in self.found.get(book, ()))

    def suggest(self, book: str, term: str, limit: int = 20) -> tuple[Candidate, ...]:
        return self.search(book, term, limit)

    def article(self, book: str, path: str) -> Any:
        raise FolioError(path, "not read here")


def test_an_older_edition_is_searched_where_the_newest_fails_or_is_damaged() -> None:
    newer, older = "wiki_en_x_mini_2022-01", "wiki_en_x_nopic_2020-05"
    pairs = ((older, newer),)
    found = {newer: ("A/One", "A/Two"), older: ("A/One", "A/Three")}
    intact = book_searches(_EditionsBackend(found), (book(newer),), pairs, "x y", "x y?")
    assert [s.book for s in intact] == [newer]  # the newest found something: the older is not searched
    failed = book_searches(_EditionsBackend(found, failing=newer), (book(newer),), pairs, "x y", "x y?")
    assert [(s.book, bool(s.error)) for s in failed] == [(newer, True), (older, False)]
    assert [c.path for c in failed[1].candidates] == ["A/One", "A/Three"]
    backend = _EditionsBackend(found, damaged=newer)
    damaged = book_searches(backend, (book(newer),), pairs, "x y", "x y?")
    assert [s.book for s in damaged] == [newer, older]
    assert [c.path for c in damaged[1].candidates] == ["A/Three"]  # only what the damaged one lacks
    catalog = KiwixCatalog(books=(book(newer), book(older)))
    assert kiwix_errors(backend, catalog, damaged) == (
        (newer, "damaged ZIM archive (test): articles that cannot be read were skipped"),
    )


def test_older_editions_newest_first() -> None:
    pairs = (
        ("wiki_en_x_2018-10", "wiki_en_x_mini_2022-01"),
        ("wiki_en_x_nopic_2020-05", "wiki_en_x_mini_2022-01"),
    )
    assert _older_editions(pairs, "wiki_en_x_mini_2022-01") == (
        "wiki_en_x_nopic_2020-05",
        "wiki_en_x_2018-10",
    )
    assert _older_editions(pairs, "other") == ()


# --- the search ladder on real books ---------------------------------------------------------------


def test_raw_question_finds_nothing_but_the_ladder_finds_the_article(zim_backend: ZimBackend) -> None:
    question = "Where do emus live in the wild?"
    assert zim_backend.search(WIKI, question, 20) == ()
    found = _search_book(
        zim_backend, WIKI, _clean_terms(question), _suggest_terms(question, _clean_terms(question))
    )
    assert found.error is None
    assert "A/Emu" in [c.path for c in found.candidates]
    assert {c.origin for c in found.candidates} <= {"relaxed", "phrase", "term", "suggest"}


def test_full_query_hit_skips_relaxation(zim_backend: ZimBackend) -> None:
    found = _search_book(zim_backend, WIKI, ("solar", "eclipse", "moon"), ())
    assert found.candidates[0].path == "A/Solar_eclipse"
    assert {c.origin for c in found.candidates} == {"search"}


def test_full_query_with_too_few_hits_is_relaxed_too(zim_backend: ZimBackend) -> None:
    terms = _clean_terms("Which Kanye West hit samples Ray Charles?")
    full = zim_backend.search(RAY, " ".join(terms), 20)
    assert 0 < len(full) < FULL_QUERY_MIN_HITS  # the gold article lacks "hit": the AND finds 1 article
    assert "A/Gold_Digger_(Kanye_West_song)" not in [c.path for c in full]
    found = _search_book(
        zim_backend, RAY, terms, _suggest_terms("Which Kanye West hit samples Ray Charles?", terms)
    )
    paths = [c.path for c in found.candidates]
    assert paths[0] == full[0].path  # the full query's results come first
    assert "A/Gold_Digger_(Kanye_West_song)" in paths


def test_backend_failure_becomes_the_book_error(zim_backend: ZimBackend) -> None:
    found = _search_book(zim_backend, "no_such_book", ("emu",), ())
    assert found.candidates == ()
    assert "no such book" in (found.error or "")


# --- book selection --------------------------------------------------------------------------------


def test_no_llm_selection_ranks_books_by_evidence(tmp_path: Path) -> None:
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), zim_paths=ALL_ZIMS)
    out = run(cfg, "Which Beatles song did Ray Charles cover?", tmp_path, ["selected_books", "book_ranking"])
    ranking = out["book_ranking"]
    assert out["selected_books"] == tuple(name for name, _ in ranking[:2])
    assert set(out["selected_books"]) == {WIKI, RAY}
    scores = [s for _, s in ranking]
    assert scores == sorted(scores, reverse=True)


def test_books_without_evidence_are_not_selected(tmp_path: Path) -> None:
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), zim_paths=ALL_ZIMS)
    out = run(cfg, "Which river was the Hoover Dam built on?", tmp_path, ["selected_books", "book_searches"])
    with_candidates = {s.book for s in out["book_searches"] if s.candidates}
    assert out["selected_books"][0] == WIKI
    assert set(out["selected_books"]) <= with_candidates


def test_kiwix_max_books_limits_the_selection(tmp_path: Path) -> None:
    cfg = kiwix_config(load_config(overrides={"llm": "none", "kiwix_max_books": 1}), zim_paths=ALL_ZIMS)
    out = run(cfg, "How should I practice ear training?", tmp_path, ["selected_books"])
    assert out["selected_books"] == (TONE,)


def test_valid_llm_books_drop_unknown_names_and_repeats() -> None:
    answer = {"books": ["nope", RAY, RAY, WIKI, TONE]}
    assert _valid_llm_books(answer, [WIKI, RAY, TONE], 2) == (RAY, WIKI)
    assert _valid_llm_books({"books": "x"}, [WIKI], 2) == ()


def llm_config(server: ScriptedLLMServer, **extra: Any) -> dict[str, Any]:
    overrides = {
        "llm": "openai",
        "llm_base_url": server.url,
        "llm_model": "scripted-model",
        "llm_max_retries": 0,
        "llm_timeout_seconds": 2.0,
        **extra,
    }
    return kiwix_config(load_config(overrides=overrides), zim_paths=ALL_ZIMS)


def test_llm_selection_uses_the_llm_ranking(tmp_path: Path) -> None:
    with ScriptedLLMServer([{"books": [RAY, "made_up_book", WIKI]}]) as server:
        out = run(
            llm_config(server), "Which river was the Hoover Dam built on?", tmp_path, ["selected_books"]
        )
        assert out["selected_books"] == (RAY, WIKI)
        assert len(server.requests) == 1
        assert WIKI in server.requests[0]["messages"][-1]["content"]


def test_llm_selection_falls_back_to_evidence_when_no_name_is_valid(tmp_path: Path) -> None:
    with ScriptedLLMServer([{"books": ["made_up_book"]}]) as server:
        out = run(
            llm_config(server), "Which river was the Hoover Dam built on?", tmp_path, ["selected_books"]
        )
    assert out["selected_books"][0] == WIKI


def test_llm_selection_falls_back_to_evidence_when_the_llm_fails(tmp_path: Path) -> None:
    with ScriptedLLMServer([Reply.fail(500)]) as server:
        out = run(
            llm_config(server), "Which river was the Hoover Dam built on?", tmp_path, ["selected_books"]
        )
    assert out["selected_books"][0] == WIKI


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": "books: wikipedia"}]},
        {"choices": [{"message": {"content": {"books": []}}}]},
        {"choices": [{"message": {"content": "", "tool_calls": "rank"}}]},
    ],
)
def test_llm_selection_survives_a_malformed_reply_shape(tmp_path: Path, body: dict[str, Any]) -> None:
    with ScriptedLLMServer([Reply(body=json.dumps(body))] * 2) as server:
        out = run(
            llm_config(server), "Which river was the Hoover Dam built on?", tmp_path, ["selected_books"]
        )
    assert out["selected_books"][0] == WIKI


# --- backends and errors ---------------------------------------------------------------------------


def test_http_backend_variant_builds_and_finds_the_article(kiwix_server: Any, tmp_path: Path) -> None:
    cfg = kiwix_config(load_config(overrides={"llm": "none"}), kiwix_url=kiwix_server.url)
    out = run(
        cfg, "Which river was the Hoover Dam built on?", tmp_path, ["selected_books", "scored_candidates"]
    )
    assert out["selected_books"][0] == WIKI
    assert out["scored_candidates"][0].candidate.path == "A/Hoover_Dam"


def test_both_backends_rank_the_same_top_candidate(kiwix_server: Any, tmp_path: Path) -> None:
    question = "What do termites feed on?"
    zims = [str(ZIMS / f"{WIKI}.zim"), str(ZIMS / f"{TONE}.zim")]
    http = run(
        kiwix_config(load_config(), kiwix_url=kiwix_server.url), question, tmp_path, ["scored_candidates"]
    )
    local = run(kiwix_config(load_config(), zim_paths=zims), question, tmp_path, ["scored_candidates"])
    top = lambda out: (out["scored_candidates"][0].candidate.path, out["scored_candidates"][0].score)  # noqa: E731
    assert top(http) == top(local)
    excerpts = lambda out: {s.candidate.path: s.candidate.excerpt for s in out["scored_candidates"]}  # noqa: E731
    assert excerpts(http) == excerpts(local)  # query excerpts are built from the same article text


def test_corrupt_zim_is_one_error_and_other_books_still_answer(tmp_path: Path) -> None:
    broken = tmp_path / "broken.zim"
    broken.write_bytes(b"this is not a zim archive" * 10)
    cfg = kiwix_config(load_config(), zim_paths=[str(broken), str(ZIMS / f"{WIKI}.zim")])
    out = run(cfg, "What do termites feed on?", tmp_path, ["kiwix_errors", "scored_candidates"])
    assert [src for src, _ in out["kiwix_errors"]] == ["broken"]
    assert out["scored_candidates"][0].candidate.path == "A/Termite"


def test_http_config_without_url_is_a_folio_error() -> None:
    with pytest.raises(FolioError, match="kiwix-serve URL"):
        kiwix_config(load_config(overrides={"kiwix": "http", "kiwix_url": None}))


def test_when_no_archive_opened_the_catalog_says_why_naming_the_first_file() -> None:
    from folio.nodes.kiwix.candidates import kiwix_catalog

    class NoneOpened:
        def __init__(self) -> None:
            self.errors = {
                "a": FolioError("/z/a.zim", "ZIM file not found"),
                "b": FolioError("/z/b.zim", "x"),
            }

        def books(self) -> tuple[KiwixBook, ...]:
            return ()

    catalog = kiwix_catalog(NoneOpened())
    assert catalog.books == () and catalog.error == (
        "/z/a.zim",
        "ZIM file not found (and 1 more archive(s) did not open)",
    )
    with ZimBackend([ZIMS / f"{WIKI}.zim"]) as one:
        assert kiwix_catalog(one).error is None
