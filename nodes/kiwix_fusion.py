"""Multi-book Kiwix fusion: the Kiwix context built from the selected books' best articles, and the
Kiwix stage's one result.

Multi-book fusion (``kiwix_context``): when more than one book was selected, each book's own best
scored result competes; books whose best score is at least ``multibook_threshold`` of the overall top
score survive. Several survivors: each one's full article is fetched, cut to
``fusion_max_chars_per_source`` characters (at a word boundary) and wrapped in a ``[BOOKNAME]`` header,
highest score first. One survivor, one selected book, or only one fetch that succeeds: that section
alone, without a header. A failed fetch becomes an error for that book; the others still answer.

``kiwix_result`` gathers what the query produced (search terms, searched and superseded books, the
selection, the scored candidates, the context and every error): the output of the Kiwix DAG
(``folio kiwix``) and, in the ask graph, the input of the Kiwix source (``nodes/source_fusion.py``).

Config keys: ``multibook_threshold``, ``fusion_max_chars_per_source``.
Limitations: a book contributes one article; a top score of zero or less keeps only the top book.
``truncate`` is public: cross-source fusion cuts its sections the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from folio.nodes.text import truncate
from folio.nodes.types import (
    ContextSection,
    FolioError,
    KiwixBook,
    KiwixContext,
    KiwixResult,
    ScoredCandidate,
)

# --- pure helpers ----------------------------------------------------------------------------------


def _best_per_source(scored: Sequence[ScoredCandidate]) -> tuple[ScoredCandidate, ...]:
    """Each book's own best candidate (input is best first), in score order."""
    best: dict[str, ScoredCandidate] = {}
    for sc in scored:
        best.setdefault(sc.candidate.book, sc)
    return tuple(sorted(best.values(), key=lambda s: -s.score))


def _survivors(best: Sequence[ScoredCandidate], threshold: float) -> tuple[ScoredCandidate, ...]:
    """Sources whose best score is at least ``threshold`` of the top score (only the top if it is <= 0)."""
    if not best:
        return ()
    top = best[0].score
    if top <= 0:
        return (best[0],)
    return tuple(s for s in best if s.score >= threshold * top)


def _fuse(sections: Sequence[ContextSection]) -> str:
    """One section: its text alone. Several: each under a ``[SOURCE]`` header, in the given order."""
    if len(sections) == 1:
        return sections[0].text
    return "\n\n".join(f"[{s.source}]\n{s.text}" for s in sections)


def _fetch_sections(
    backend: Any, chosen: Sequence[ScoredCandidate], max_chars: int
) -> tuple[list[ContextSection], list[tuple[str, str]]]:
    sections: list[ContextSection] = []
    errors: list[tuple[str, str]] = []
    for sc in chosen:
        cand = sc.candidate
        try:
            art = backend.article(cand.book, cand.path)
        except FolioError as exc:
            errors.append((cand.book, exc.reason))
            continue
        sections.append(
            ContextSection(cand.book, art.title, art.url, sc.score, truncate(art.text, max_chars))
        )
    return sections, errors


# --- nodes -----------------------------------------------------------------------------------------


def kiwix_context(
    scored_candidates: tuple[ScoredCandidate, ...],
    selected_books: tuple[str, ...],
    kiwix_backend: Any,
    multibook_threshold: float | int = 0.5,
    fusion_max_chars_per_source: int = 1500,
) -> KiwixContext:
    """The context from the selected books' best articles (multi-book fusion when several books)."""
    in_selection = [s for s in scored_candidates if s.candidate.book in selected_books]
    best = _best_per_source(in_selection)
    chosen = _survivors(best, float(multibook_threshold)) if len(selected_books) > 1 else best[:1]
    sections, errors = _fetch_sections(kiwix_backend, chosen, int(fusion_max_chars_per_source))
    return KiwixContext(_fuse(sections) if sections else "", tuple(sections), tuple(errors))


def kiwix_result(
    kiwix_query: str,
    search_terms: str,
    searched_books: tuple[KiwixBook, ...],
    superseded_books: tuple[tuple[str, str], ...],
    selected_books: tuple[str, ...],
    scored_candidates: tuple[ScoredCandidate, ...],
    kiwix_context: KiwixContext,
    kiwix_errors: tuple[tuple[str, str], ...],
) -> KiwixResult:
    """Everything the Kiwix query produced: books, scored candidates, context and errors."""
    return KiwixResult(
        query=kiwix_query,
        search_terms=search_terms,
        selected_books=selected_books,
        candidates=scored_candidates,
        context=kiwix_context,
        errors=tuple(kiwix_errors) + kiwix_context.errors,
        searched_books=tuple(b.name for b in searched_books),
        superseded_books=tuple(superseded_books),
    )
