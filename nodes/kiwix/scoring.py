"""Scoring of Kiwix candidates: the ``scored_candidates`` node ranks every candidate, from every path
(search, relaxation, title suggestions, disambiguation), by one additive table of signals: exact and
stemmed title, title prefix, per-word title hits, excerpt overlap, list penalty, primary book. The table
and its points are in ``nodes/core/ranking.py`` (shared with the book selection of
``nodes/kiwix/candidates.py``).

Config keys: none (inputs ``kiwix_candidates``, ``search_terms``, ``kiwix_query``, ``selected_books``:
the first selected book is the primary one).
Limitations: titles and excerpts are compared as bags of plural-stemmed words, so word order and
synonyms are invisible.
"""

from __future__ import annotations

from folio.nodes.core.kiwix_types import Candidate, ScoredCandidate
from folio.nodes.core.ranking import rank_candidates


def scored_candidates(
    kiwix_candidates: tuple[Candidate, ...],
    search_terms: str,
    kiwix_query: str,
    selected_books: tuple[str, ...],
) -> tuple[ScoredCandidate, ...]:
    """All candidates scored and ranked, best first, each with its per-signal breakdown (the first
    selected book is the primary one)."""
    primary = selected_books[0] if selected_books else ""
    return rank_candidates(kiwix_candidates, tuple(search_terms.split()), kiwix_query, primary)
