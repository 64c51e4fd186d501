"""Multi-book fusion: which books survive, headers, truncation and failing books."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.nodes.backends.zim import ZimBackend
from folio.nodes.kiwix_fusion import _best_per_source, _fuse, _survivors, kiwix_context
from folio.nodes.text import truncate
from folio.nodes.types import Article, Candidate, ContextSection, FolioError, ScoredCandidate
from tests.conftest import ZIMS

WIKI = "wikipedia_en_100_mini_2022-10"
RAY = "wikipedia_en_ray_charles_mini_2020-03"


def sc(book: str, path: str, score: float) -> ScoredCandidate:
    cand = Candidate(book, path, path.split("/")[-1], "", f"zim://{book}/{path}")
    return ScoredCandidate(cand, score, (("test", score),))


class FakeBackend:
    """Articles of a fixed text; books in ``broken`` fail."""

    def __init__(self, broken: tuple[str, ...] = ()) -> None:
        self.broken = broken
        self.fetched: list[tuple[str, str]] = []

    def article(self, book: str, path: str) -> Article:
        self.fetched.append((book, path))
        if book in self.broken:
            raise FolioError(book, "archive unreadable")
        return Article(book, path, path, f"{book} text " + "word " * 1000, f"zim://{book}/{path}")


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


def test_one_section_has_no_header_several_have_book_headers() -> None:
    one = ContextSection("a", "T", "u", 1.0, "text a")
    two = ContextSection("b", "T", "u", 0.5, "text b")
    assert _fuse([one]) == "text a"
    assert _fuse([one, two]) == "[a]\ntext a\n\n[b]\ntext b"


def test_two_surviving_books_are_fused_with_headers_highest_first() -> None:
    scored = (sc("a", "A/1", 30), sc("b", "A/2", 20))
    ctx = kiwix_context(scored, ("b", "a"), FakeBackend(), 0.5, 100)
    assert [s.source for s in ctx.sections] == ["a", "b"]
    assert ctx.text.startswith("[a]\na text")
    assert "\n\n[b]\nb text" in ctx.text
    assert all(len(s.text) <= 100 for s in ctx.sections)


def test_book_below_the_threshold_is_dropped_and_no_header_is_used() -> None:
    backend = FakeBackend()
    ctx = kiwix_context((sc("a", "A/1", 30), sc("b", "A/2", 10)), ("a", "b"), backend, 0.5, 1500)
    assert [s.source for s in ctx.sections] == ["a"]
    assert not ctx.text.startswith("[")
    assert backend.fetched == [("a", "A/1")]


def test_single_selected_book_uses_only_its_best_article() -> None:
    backend = FakeBackend()
    ctx = kiwix_context((sc("a", "A/1", 30), sc("a", "A/2", 29)), ("a",), backend, 0.5, 1500)
    assert backend.fetched == [("a", "A/1")]
    assert len(ctx.text) <= 1500


def test_failing_book_degrades_to_the_other_section_without_header() -> None:
    ctx = kiwix_context(
        (sc("a", "A/1", 30), sc("b", "A/2", 25)), ("a", "b"), FakeBackend(broken=("a",)), 0.5, 200
    )
    assert ctx.errors == (("a", "archive unreadable"),)
    assert [s.source for s in ctx.sections] == ["b"]
    assert ctx.text.startswith("b text")


def test_no_candidates_give_an_empty_context() -> None:
    ctx = kiwix_context((), ("a",), FakeBackend(), 0.5, 1500)
    assert ctx.text == "" and ctx.sections == ()


@pytest.mark.parametrize("max_chars", [300, 1500])
def test_real_articles_from_two_books_are_fused(max_chars: int, tmp_path: Path) -> None:
    with ZimBackend([ZIMS / f"{WIKI}.zim", ZIMS / f"{RAY}.zim"]) as backend:
        scored = (sc(WIKI, "A/The_Beatles", 30), sc(RAY, "A/Eleanor_Rigby", 28))
        ctx = kiwix_context(scored, (WIKI, RAY), backend, 0.5, max_chars)
    assert ctx.text.startswith(f"[{WIKI}]\n")
    assert f"\n\n[{RAY}]\n" in ctx.text
    assert "Liverpool" in ctx.sections[0].text
    assert "Eleanor Rigby" in ctx.sections[1].text
    assert all(len(s.text) <= max_chars for s in ctx.sections)
