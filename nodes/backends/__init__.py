"""Clients behind Folio's nodes: Kiwix backends (libzim, kiwix-serve) and the OpenAI-compatible LLM client.

``KiwixBackend`` is the interface both Kiwix backends implement (``zim.ZimBackend`` reads ``.zim`` files
in-process, ``kiwix_http.KiwixHttpBackend`` talks to a kiwix-serve). Both return the same candidates,
titles and excerpts for the same archive. Modules are imported lazily by their users so that an optional
dependency is only needed by the backend that uses it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from folio.nodes.core.kiwix_types import Article, Candidate, KiwixBook


@runtime_checkable
class KiwixBackend(Protocol):
    """Search and read Kiwix books. Every failure is a ``FolioError`` naming the book, file or URL."""

    def books(self) -> tuple[KiwixBook, ...]:
        """The books that can be searched."""
        ...

    def search(self, book: str, query: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Full-text (Xapian) search of one book, best first, redirects resolved, no duplicates."""
        ...

    def suggest(self, book: str, term: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Title suggestions for ``term`` in one book, redirects resolved, no duplicates."""
        ...

    def article(self, book: str, path: str) -> Article:
        """One article as clean text (a redirect is followed to its target)."""
        ...

    def close(self) -> None:
        """Release files or connections."""
        ...


def mentions_wikipedia(*fields: str | None) -> bool:
    """Whether any metadata field (Name, Title, Creator, Source) mentions Wikipedia."""
    return any("wikipedia" in (field or "").casefold() for field in fields)
