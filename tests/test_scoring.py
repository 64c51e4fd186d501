"""Scoring: every signal row of the table, the stemmer, and ranking of real candidates."""

from __future__ import annotations

import pytest

from folio.nodes.core import ranking as scores
from folio.nodes.core.kiwix_types import Candidate
from folio.nodes.core.ranking import _score, rank_candidates
from folio.nodes.core.text import is_definitional, plural_stem
from folio.nodes.kiwix.scoring import scored_candidates
from tests.conftest import ZIMS


def cand(title: str, excerpt: str = "", book: str = "other", path: str = "A/X") -> Candidate:
    return Candidate(book=book, path=path, title=title, excerpt=excerpt, url=f"zim://{book}/{path}")


def signals(
    title: str, question: str, terms: str, excerpt: str = "", book: str = "other", primary: str = "main"
):
    return dict(_score(cand(title, excerpt, book), tuple(terms.split()), question, primary).breakdown)


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("galaxies", "galaxy"),
        ("Galaxy", "galaxy"),
        ("boxes", "box"),
        ("churches", "church"),
        ("horses", "horse"),
        ("emus", "emu"),
        ("beatles", "beatle"),
        ("gas", "gas"),
        ("virus", "virus"),
        ("analysis", "analysis"),
        ("glass", "glass"),
        ("this", "this"),
        ("less", "less"),
        ("across", "across"),
        ("always", "always"),
        ("towards", "towards"),
        ("ties", "tie"),
    ],
)
def test_stemmer_golden_cases(word: str, stem: str) -> None:
    assert plural_stem(word) == stem


def test_exact_title_match_is_plus_twenty_case_insensitive_and_trimmed() -> None:
    s = signals("  Solar Eclipse ", "solar eclipse", "solar eclipse")
    assert s["exact_title"] == 20
    assert "stemmed_title" not in s  # exclusive with the stemmed match


def test_exact_title_match_accepts_the_raw_question_typed_as_a_title() -> None:
    assert signals("The Beatles", "The Beatles?", "beatles")["exact_title"] == 20


def test_exact_title_match_folds_accents_like_the_search_terms() -> None:
    assert signals("Zürich", "Where is Zürich?", "zurich")["exact_title"] == 20
    assert signals("Café", "Café", "cafe")["exact_title"] == 20


def test_possessive_in_an_excerpt_counts_as_the_word() -> None:
    assert signals("X", "q", "emus", excerpt="the emu's egg")["excerpt_overlap"] == 10


def test_stemmed_title_match_is_plus_fifteen_for_a_plural_query() -> None:
    s = signals("Galaxy", "What are galaxies?", "galaxies")
    assert s["stemmed_title"] == 15
    assert "exact_title" not in s


def test_stemmed_title_match_fires_for_any_single_query_word() -> None:
    assert signals("Emu", "Where do emus live in the wild?", "emus live wild")["stemmed_title"] == 15


def test_stemmed_title_match_counts_a_word_inside_a_named_phrase_as_the_table_says() -> None:
    s = signals("Ray (film)", "Why did Ray Charles lose his sight?", "ray charles lose sight")
    assert s["stemmed_title"] == 15  # any query word (issue 32: measured better than the exception)


def test_title_starting_with_a_four_letter_query_word_is_plus_ten() -> None:
    s = signals("Apollo 13", "What went wrong on Apollo 13?", "went wrong apollo 13")
    assert s["title_starts_with_term"] == 10


def test_title_starting_with_a_short_query_word_gets_no_start_bonus() -> None:
    assert "title_starts_with_term" not in signals("Ant colony", "ant colony size", "ant colony size")


def test_each_stemmed_query_word_in_the_title_is_plus_five() -> None:
    s = signals("Hoover Dam", "Which river was the Hoover Dam built on?", "river hoover dam built")
    assert s["title_word_hits"] == 10


def test_excerpt_overlap_scales_with_density_and_caps_at_ten() -> None:
    dense = signals("X", "q", "moon sun", excerpt="moon sun moon sun")
    assert dense["excerpt_overlap"] == 10
    # 1 matching word of 20: density 0.05 -> half of the full-density (0.10) points
    sparse = signals("X", "q", "moon", excerpt="moon " + "word " * 19)
    assert sparse["excerpt_overlap"] == pytest.approx(5.0)
    assert "excerpt_overlap" not in signals("X", "q", "moon", excerpt="nothing relevant here")


def test_list_article_penalty_is_net_minus_seven() -> None:
    s = signals("List of Roman emperors", "Who ruled Rome?", "ruled rome")
    assert s["list_penalty"] == -10
    assert s["list_offset"] == 3
    assert s["list_penalty"] + s["list_offset"] == -7


def test_list_article_penalty_is_net_minus_two_for_a_definitional_query() -> None:
    s = signals("Lists of galaxies", "What are galaxies?", "galaxies")
    assert s["list_penalty"] + s["list_offset"] == -2


@pytest.mark.parametrize("title", ["Index of physics articles", "Outline of biology", "Category:Cats"])
def test_every_list_prefix_is_penalised(title: str) -> None:
    assert signals(title, "q", "zzz")["list_penalty"] == -10


def test_primary_book_is_plus_two() -> None:
    assert signals("X", "q", "zzz", book="main", primary="main") == {"primary_book": 2}
    assert signals("X", "q", "zzz", book="other", primary="main") == {}


def test_score_is_the_sum_of_the_breakdown() -> None:
    sc = _score(cand("Solar eclipse", "a solar eclipse occurs", "main"), ("solar", "eclipse"), "q", "main")
    assert sc.score == pytest.approx(sum(p for _, p in sc.breakdown))


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is Mercury?", True),
        ("what are galaxies", True),
        ("Tell me about Mercury", True),
        ("What's the deal with Mercury?", True),
        ("what's up with mercury", True),
        ("Why did the Beatles stop touring?", False),
        ("Who wrote Hamlet?", False),
    ],
)
def test_definitional_queries(question: str, expected: bool) -> None:
    assert is_definitional(question) is expected


def test_ranking_is_stable_for_ties() -> None:
    a, b = cand("Alpha", path="A/1"), cand("Beta", path="A/2")
    ranked = rank_candidates((a, b), ("zzz",), "q", "")
    assert [s.candidate.path for s in ranked] == ["A/1", "A/2"]


def test_real_candidates_rank_the_emu_first() -> None:
    from folio.nodes.backends.zim import ZimBackend

    book = "wikipedia_en_100_mini_2022-10"
    with ZimBackend([ZIMS / f"{book}.zim"]) as backend:
        found = backend.search(book, "emus live", 20) + backend.search(book, "live wild", 20)
    ranked = scored_candidates(found, "emus live wild", "Where do emus live in the wild?", (book,))
    assert ranked[0].candidate.path == "A/Emu"
    assert dict(ranked[0].breakdown)["stemmed_title"] == scores.STEMMED_TITLE
