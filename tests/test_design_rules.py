"""Rules of the design kept exactly (issue 32) that no stage's own test file covers: the ask's notes."""

from __future__ import annotations

from folio.nodes.answering import answer
from folio.nodes.backends.tools import ToolBudget
from folio.nodes.source_fusion import fused_context
from folio.nodes.types import Citation, RouteDecision, SourceResult

NO_OTHER_SOURCE = (
    "no other source is configured or reachable for a question outside the books: searched the books"
)
TARTS, BEATLES = "Who stole the tarts", "why did the Beatles stop touring"


def _answer(routes: tuple[RouteDecision, ...], results: tuple[SourceResult, ...]):
    return answer(
        " and ".join(r.question for r in routes), routes, fused_context(results), results, ToolBudget()
    )


def test_the_no_other_source_note_appears_only_when_a_non_book_clause_went_to_the_books() -> None:
    routes = (
        RouteDecision("BOOK", 0.9, (), ("alice",), "", TARTS),
        RouteDecision("NOT_BOOK", 0.9, (), (), "", BEATLES),
    )
    book = SourceResult(
        "book", "Alice", "The Knave of Hearts stole the tarts.", (Citation("book"),), clause=TARTS
    )
    kiwix = SourceResult(
        "kiwix", "The Beatles", "They stopped touring in 1966.", (Citation("kiwix"),), clause=BEATLES
    )
    assert NO_OTHER_SOURCE not in _answer(routes, (book, kiwix)).notes  # Kiwix answered the second clause
    searched = SourceResult("book", "Alice", "The Beatles sang.", (Citation("book"),), clause=BEATLES)
    assert NO_OTHER_SOURCE in _answer(routes, (book, searched)).notes  # no other source: the books took it
