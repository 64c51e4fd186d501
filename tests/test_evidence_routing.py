"""Routing and refusal by evidence across sources (issue 27, point 4): a Kiwix article is cited only when
it holds the question's subject, and a refusal says what was searched where."""

from __future__ import annotations

from folio.nodes.source_fusion import _kiwix_source_results
from folio.nodes.types import ContextSection, KiwixContext, KiwixResult

WIKI = "wikipedia_en_100_mini_2022-10"


def _result(query: str, *sections: ContextSection) -> KiwixResult:
    return KiwixResult(query, query, (WIKI,), (), KiwixContext("", sections), (), (WIKI,))


def _section(title: str, text: str) -> ContextSection:
    return ContextSection(WIKI, title, f"https://x/{title}", 1.0, text, f"A/{title}")


def test_a_kiwix_article_without_the_questions_subject_is_not_cited() -> None:
    termites = _section("Termites", "Termites are eusocial insects that dissolve wood in their guts.")
    (result,) = _kiwix_source_results(_result("Why did the Red-Headed League dissolve?", termites))
    assert result.citations == () and result.label == WIKI
    assert result.text == "no results found"  # an empty result (the refusal), the note says why
    assert result.notes == (
        "kiwix: 'Termites' does not hold the question's subject (Red Headed League): not cited",
    )


def test_a_kiwix_article_holding_the_subject_is_cited() -> None:
    league = _section("The Red-Headed League", "The League was dissolved when the tunnel was finished.")
    termites = _section("Termites", "Termites dissolve wood.")
    results = _kiwix_source_results(_result("Why did the Red-Headed League dissolve?", league, termites))
    assert [r.label for r in results] == ["The Red-Headed League"] and results[0].citations


def test_a_question_without_names_keeps_every_article() -> None:
    gas = _section("Noble gas", "The noble gases are helium, neon, argon...")
    (result,) = _kiwix_source_results(_result("What is a noble gas?", gas))
    assert result.citations and result.label == "Noble gas"


def test_no_article_at_all_names_the_archives_searched() -> None:
    (result,) = _kiwix_source_results(_result("Why did the Red-Headed League dissolve?"))
    assert (result.label, result.text, result.citations) == (WIKI, "no results found", ())
