"""Kiwix book selection before searching (issue 32, point 8) and the question stop words (point 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.dataflows.kiwix_query import kiwix_answer
from folio.nodes.core.kiwix_types import Candidate, KiwixBook, KiwixCatalog
from folio.nodes.core.ranking import rank_candidates
from folio.nodes.kiwix.candidates import _catalogue_choice, _clean_terms, searched_books
from tests.conftest import ZIMS


def book(
    name: str, title: str, description: str, count: int, wiki: bool = True, lang: str = "eng"
) -> KiwixBook:
    return KiwixBook(name, title, lang, description, count, wiki, f"/z/{name}.zim")


CATALOGUE = (
    book("tonedear", "Tone Dear.com", "Ear Training for Musicians", 12, wiki=False),
    book("ray", "Ray Charles", "Wikipedia articles about Ray Charles", 129),
    book("top100", "Wikipedia 100", "Top hundred Wikipedia articles", 101),
    book("wiki_fr", "Wikipédia", "Articles de Wikipédia en français", 20_000, lang="fra"),
    *(book(f"shelf{i}", f"Shelf {i}", f"Cooking recipes volume {i}", 50, wiki=False) for i in range(8)),
)


def test_few_archives_are_all_searched_many_are_chosen_by_the_catalogue_first() -> None:
    assert searched_books(KiwixCatalog(CATALOGUE[:5]), "What is ear training?", 2, 8) == CATALOGUE[:5]
    chosen = searched_books(KiwixCatalog(CATALOGUE), "How do I practise ear training?", 2, 8)
    assert len(chosen) == 2 and chosen[0].name == "tonedear"
    assert [b.name for b in _catalogue_choice(CATALOGUE, "Where did Ray Charles grow up?", 1)] == ["ray"]
    assert "wiki_fr" not in [b.name for b in _catalogue_choice(CATALOGUE, "What is photosynthesis?", 3)]


@pytest.mark.slow  # opens 50 archives
def test_fifty_archives_cost_the_searches_of_two(tmp_path: Path) -> None:
    paths = []
    for original in sorted(ZIMS.glob("*.zim")):
        for i in range(10):
            link = tmp_path / f"{original.stem}_copy{i}.zim"
            link.symlink_to(original)
            paths.append(link)
    result = kiwix_answer("What is the best way to practice ear training?", zim_paths=paths)
    assert len(paths) == 50 and len(result.searched_books) == 2
    assert result.selected_books[0].startswith("tonedear.com_en_2024-09_copy")


def test_way_is_not_a_question_stop_word() -> None:
    terms = _clean_terms("What is the Milky Way?")
    assert terms == ("milky", "way")
    milky = Candidate("wiki", "A/Milky_Way", "Milky Way", "The Milky Way is the galaxy.", "")
    scored = rank_candidates((milky,), terms, "What is the Milky Way?", "")
    assert ("exact_title", 20.0) in scored[0].breakdown
