"""The Kiwix values: archives as books, their candidates and articles, and what a Kiwix query produced.

Pure values (frozen dataclasses), split from ``nodes/core/types.py``, which holds the book and ask values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KiwixCatalog:
    """The books a Kiwix backend offers, or why it offers none (a kiwix-serve that cannot be reached)."""

    books: tuple[KiwixBook, ...]
    error: tuple[str, str] | None = None  # (source, reason)


@dataclass(frozen=True)
class KiwixBook:
    """One ZIM archive as a searchable book. ``name`` is the file name without ``.zim``."""

    name: str
    title: str
    language: str
    description: str
    article_count: int
    is_wikipedia: bool
    location: str  # file path (libzim) or base URL (http)


@dataclass(frozen=True)
class Candidate:
    """One article found in a Kiwix book, with clean text (no HTML) in title and excerpt."""

    book: str
    path: str
    title: str
    excerpt: str
    url: str
    origin: str = "search"  # how it was found: "search", "suggest", "disambiguation", ...


@dataclass(frozen=True)
class ArticleSection:
    """One section of an article: its heading path and its prose (``nodes/backends/html_text.py``).

    ``title`` is "" for the lead and "Heading › Subheading" below; ``paragraphs`` are prose only (no
    infobox, navbox, link list, reference, hatnote or caption); ``tables`` hold each data table of the
    section as lines, one row a line, cells joined by " | " (header row first).
    """

    title: str
    paragraphs: tuple[str, ...]
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Article:
    """A whole article read from a Kiwix book, as clean text, and its prose by section."""

    book: str
    path: str
    title: str
    text: str
    url: str
    sections: tuple[ArticleSection, ...] = ()


# --- the Kiwix query path (nodes/kiwix/: candidates.py, scoring.py, fusion.py) ---


@dataclass(frozen=True)
class ScoredCandidate:
    """A candidate with its total score and the points of every signal that fired."""

    candidate: Candidate
    score: float
    breakdown: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class BookSearch:
    """What the search ladder found in one book, or why that book could not be searched."""

    book: str
    candidates: tuple[Candidate, ...]
    error: str | None = None


@dataclass(frozen=True)
class ContextSection:
    """One source's part of the context: the passage of its best article that answers the question."""

    source: str  # book name (or any source label)
    title: str
    url: str
    score: float
    text: str  # the passage (a few sentences of one paragraph, or a table's header and best rows)
    path: str = ""  # the article's path in its book
    section: str = ""  # the article section the passage comes from ("" = the lead)
    lead: str = ""  # the article's opening paragraph: what it is about (judged with the passage)


@dataclass(frozen=True)
class KiwixContext:
    """The fused context, the sections it was built from, and per-source errors (source, reason)."""

    text: str
    sections: tuple[ContextSection, ...]
    errors: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class KiwixResult:
    """Everything one Kiwix query produced (``nodes/kiwix/fusion.py::kiwix_result``)."""

    query: str
    search_terms: str
    selected_books: tuple[str, ...]
    candidates: tuple[ScoredCandidate, ...]
    context: KiwixContext
    errors: tuple[tuple[str, str], ...]
    searched_books: tuple[str, ...] = ()
    superseded_books: tuple[tuple[str, str], ...] = ()  # (older edition, newer edition)

    def as_dict(self, max_candidates: int = 10) -> dict[str, Any]:
        """A JSON-ready view: books, the top candidates with their per-signal breakdown, the context
        (the answer) and its sources (each book's article, section, URL and passage)."""
        return {
            "query": self.query,
            "search_terms": self.search_terms,
            "searched_books": list(self.searched_books),
            "superseded_books": [{"book": old, "by": new} for old, new in self.superseded_books],
            "selected_books": list(self.selected_books),
            "primary_book": self.selected_books[0] if self.selected_books else None,
            "candidates_total": len(self.candidates),
            "candidates": [
                {
                    "rank": rank,
                    "book": s.candidate.book,
                    "path": s.candidate.path,
                    "title": s.candidate.title,
                    "url": s.candidate.url,
                    "origin": s.candidate.origin,
                    "score": s.score,
                    "breakdown": dict(s.breakdown),
                    "excerpt": s.candidate.excerpt,
                }
                for rank, s in enumerate(self.candidates[:max_candidates], 1)
            ],
            "context": self.context.text,
            "sources": [
                {
                    "book": s.source,
                    "path": s.path,
                    "title": s.title,
                    "section": s.section,
                    "url": s.url,
                    "score": s.score,
                    "passage": s.text,
                }
                for s in self.context.sections
            ],
            "errors": [{"source": src, "reason": reason} for src, reason in self.errors],
        }
