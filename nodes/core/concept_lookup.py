"""Concept-map lookup results as text: ``format_matches`` prints what ``ConceptMap.lookup`` found.

A plain module (never handed to a Hamilton driver). The lookup itself lives with the concept map in
``nodes.core.types`` (``concept_map_lookup``, reachable as ``ConceptMap.lookup``), re-exported here; the CLI
prints its result with ``format_matches``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from folio.nodes.core.types import ConceptMatches, concept_map_lookup

__all__ = ["concept_map_lookup", "format_matches"]

_KIND_ORDER = {"entity": 0, "event": 1, "theme": 2}  # ties between equal scores in format_matches


def format_matches(
    matches: ConceptMatches, chapter_titles: Mapping[str, str] | None = None, max_chapters: int = 6
) -> str:
    """Human-readable lines for ``folio concepts``: one line per match, then the ranked chapters.

    Each match gives its kind, score and label, then its first ``max_chapters`` chapters (titles from
    ``chapter_titles`` when given, else ids). Matches of all kinds are merged by score.
    """
    titles = chapter_titles or {}

    def chapters(ids: Sequence[str]) -> str:
        shown = ", ".join(titles.get(c, c) for c in ids[:max_chapters])
        more = f" (+{len(ids) - max_chapters} more)" if len(ids) > max_chapters else ""
        return shown + more

    found = sorted(
        [*matches.entities, *matches.events, *matches.themes],
        key=lambda m: (-m.score, _KIND_ORDER[m.kind], m.label),
    )
    if not found:
        return f"no entities, themes or events match {matches.query!r}"
    lines = []
    for m in found:
        lines.append(f"{m.kind:<6}  {m.score:5.3f}  {m.label}")
        lines.append(f"        chapters: {chapters(m.chapter_ids)}")
    lines.append(f"best chapters: {chapters(matches.chapter_ids)}")
    return "\n".join(lines)
