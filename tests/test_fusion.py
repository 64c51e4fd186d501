"""Multi-book Kiwix fusion and passage answers: which books survive, one level of headers, the passage
of the article that answers (section, URL, length), tables only when they answer, failing books."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.kiwix_types import Article, ArticleSection, Candidate, ContextSection, ScoredCandidate
from folio.nodes.core.text import truncate
from folio.nodes.core.types import FolioError
from folio.nodes.kiwix.fusion import (
    _article_passage,
    _best_per_source,
    _defines_article,
    _fuse,
    _survivors,
    kiwix_context,
)
from tests.conftest import ZIMS

WIKI = "wikipedia_en_100_mini_2022-10"
RAY = "wikipedia_en_ray_charles_mini_2020-03"
RAY_FULL = "wikipedia_en_ray_charles_novid_2018-10"


def sc(book: str, path: str, score: float) -> ScoredCandidate:
    cand = Candidate(book, path, path.split("/")[-1], "", f"zim://{book}/{path}")
    return ScoredCandidate(cand, score, (("test", score),))


GLACIER = Article(
    "b",
    "A/Glacier",
    "Glacier",
    "",
    "zim://b/A/Glacier",
    (
        ArticleSection("", ("A glacier is a persistent body of dense ice that is constantly moving.",)),
        ArticleSection(
            "Formation",
            (
                "Glaciers form where snow accumulates faster than it melts over many years.",
                "The snow is compressed into firn and then into glacial ice over decades.",
            ),
        ),
        ArticleSection(
            "Largest glaciers",
            ("Some glaciers are very large and are found in the polar regions.",),
            ("Glacier | Area | Country\nLambert | 100,000 km2 | Antarctica\nSiachen | 700 km2 | India",),
        ),
    ),
)


class FakeBackend:
    """Articles of a fixed text in two sections; books in ``broken`` fail."""

    def __init__(self, broken: tuple[str, ...] = ()) -> None:
        self.broken = broken
        self.fetched: list[tuple[str, str]] = []

    def article(self, book: str, path: str) -> Article:
        self.fetched.append((book, path))
        if book in self.broken:
            raise FolioError(book, "archive unreadable")
        sections = (
            ArticleSection("", (f"{book} is a book about many things and places.",)),
            ArticleSection("Rivers", (f"The longest river in {book} is the Velta. " + "It is wide. " * 50,)),
        )
        return Article(book, path, path, "", f"zim://{book}/{path}", sections)


def test_best_per_source_keeps_each_books_top_candidate() -> None:
    scored = (sc("a", "A/1", 30), sc("a", "A/2", 29), sc("b", "A/3", 20))
    assert [s.candidate.path for s in _best_per_source(scored)] == ["A/1", "A/3"]


def test_survivors_keep_books_at_or_above_the_threshold() -> None:
    best = (sc("a", "A/1", 30), sc("b", "A/2", 15), sc("c", "A/3", 14.9))
    assert [s.candidate.book for s in _survivors(best, 0.5)] == ["a", "b"]


def test_non_positive_top_score_keeps_only_the_top() -> None:
    assert [s.candidate.book for s in _survivors((sc("a", "A/1", 0), sc("b", "A/2", 0)), 0.5)] == ["a"]


def test_truncate_cuts_at_a_word_boundary() -> None:
    assert truncate("alpha beta gamma", 12) == "alpha beta"
    assert truncate("short", 100) == "short"
    assert len(truncate("x" * 3000, 1500)) == 1500


def test_one_section_has_no_header_several_have_one_header_each() -> None:
    one = ContextSection("a", "T", "u", 1.0, "text a")
    two = ContextSection("b", "U", "u", 0.5, "text b")
    assert _fuse([one]) == "text a"
    assert _fuse([one, two]) == "[a — T]\ntext a\n\n[b — U]\ntext b"


def test_the_passage_comes_from_the_section_that_answers_and_cites_it() -> None:
    section, passage = _article_passage("How do glaciers form from snow?", GLACIER, None, 60)
    assert section == "Formation"
    assert passage.startswith("Glaciers form where snow accumulates")


def test_a_table_answers_only_when_it_matches_clearly_better_than_every_paragraph() -> None:
    section, passage = _article_passage("Which country has the Siachen glacier?", GLACIER, None, 60)
    assert section == "Largest glaciers"
    assert passage.split("\n") == ["Glacier | Area | Country", "Siachen | 700 km2 | India"]
    # a question the prose answers as well as the table does is answered by the prose
    assert "\n" not in _article_passage("Where are very large glaciers found?", GLACIER, None, 60)[1]


@pytest.mark.parametrize(
    ("question", "title", "defines"),
    [
        ("What is a noble gas?", "Noble gas", True),
        ("What are noble gases?", "Noble gas", False),  # the light stemmer keeps "gases"
        ("What are the raccoon's most distinctive features?", "Raccoon", False),
        ("Why did the Beatles stop touring?", "The Beatles", False),
        ("What is a glacier?", "Glacier", True),
    ],
)
def test_a_what_is_question_about_the_article_itself_is_a_definition(
    question: str, title: str, defines: bool
) -> None:
    assert _defines_article(question, title) is defines


def test_a_definition_is_the_leads_opening_sentence() -> None:
    assert _article_passage("What is a glacier?", GLACIER, None, 60) == (
        "",
        "A glacier is a persistent body of dense ice that is constantly moving.",
    )


def test_an_article_without_sections_answers_from_its_text_blocks() -> None:
    art = Article("b", "p", "Page", "Menu\n\nThe Velta river is long and wide.", "zim://b/p")
    assert _article_passage("How long is the Velta river?", art, None, 60) == (
        "",
        "The Velta river is long and wide.",
    )
    assert _article_passage("anything", Article("b", "p", "Page", "", "zim://b/p"), None, 60) == ("", "")


def test_two_surviving_books_answer_with_one_header_each_highest_first() -> None:
    scored = (sc("a", "A/1", 30), sc("b", "A/2", 20))
    ctx = kiwix_context(scored, ("b", "a"), FakeBackend(), "What is the longest river?", None, 0.5, 1500, 60)
    assert [(s.source, s.section, s.path) for s in ctx.sections] == [
        ("a", "Rivers", "A/1"),
        ("b", "Rivers", "A/2"),
    ]
    assert ctx.text.startswith("[a — A/1]\nThe longest river in a is the Velta.")
    assert "\n\n[b — A/2]\nThe longest river in b is the Velta." in ctx.text
    assert all(len(s.text.split()) <= 60 for s in ctx.sections)
    assert ctx.sections[0].url == "zim://a/A/1"


def test_book_below_the_threshold_is_dropped_and_no_header_is_used() -> None:
    backend = FakeBackend()
    ctx = kiwix_context((sc("a", "A/1", 30), sc("b", "A/2", 10)), ("a", "b"), backend, "q", None, 0.5, 1500)
    assert [s.source for s in ctx.sections] == ["a"]
    assert not ctx.text.startswith("[")
    assert backend.fetched == [("a", "A/1")]


def test_single_selected_book_uses_only_its_best_article() -> None:
    backend = FakeBackend()
    ctx = kiwix_context((sc("a", "A/1", 30), sc("a", "A/2", 29)), ("a",), backend, "river", None, 0.5, 20)
    assert backend.fetched == [("a", "A/1")]
    assert len(ctx.text) <= 20


def test_failing_book_degrades_to_the_other_section_without_header() -> None:
    ctx = kiwix_context(
        (sc("a", "A/1", 30), sc("b", "A/2", 25)), ("a", "b"), FakeBackend(broken=("a",)), "river", None, 0.5
    )
    assert ctx.errors == (("a", "archive unreadable"),)
    assert [s.source for s in ctx.sections] == ["b"]
    assert ctx.text.startswith("The longest river in b")


def test_no_candidates_give_an_empty_context() -> None:
    ctx = kiwix_context((), ("a",), FakeBackend(), "q")
    assert ctx.text == "" and ctx.sections == ()


def test_real_articles_from_two_books_each_give_their_passage(tmp_path: Path) -> None:
    with ZimBackend([ZIMS / f"{WIKI}.zim", ZIMS / f"{RAY}.zim"]) as backend:
        scored = (sc(WIKI, "A/The_Beatles", 30), sc(RAY, "A/Eleanor_Rigby", 28))
        ctx = kiwix_context(scored, (WIKI, RAY), backend, "Which Beatles song did Ray Charles cover?")
    assert ctx.text.startswith(f"[{WIKI} — The Beatles]\n")
    assert f"\n\n[{RAY} — Eleanor Rigby]\n" in ctx.text
    assert "Eleanor Rigby" in ctx.sections[1].text
    assert all(0 < len(s.text.split()) <= 60 for s in ctx.sections)
    assert ctx.sections[1].url == f"zim://{RAY}/A/Eleanor_Rigby"


def test_a_passage_deep_in_a_full_article_is_found_and_its_section_cited() -> None:
    with ZimBackend([ZIMS / f"{RAY_FULL}.zim"]) as backend:
        art = backend.article(RAY_FULL, "A/Ray_Charles.html")
    section, passage = _article_passage("When did Ray Charles have hip replacement surgery?", art, None, 60)
    assert section == "Death"
    assert "In 2003, Charles had successful hip replacement surgery" in passage
    assert len(passage.split()) <= 60
