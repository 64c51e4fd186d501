"""Kiwix backend over local ``.zim`` files with python-libzim (config ``kiwix: libzim``, ``zim_paths``).

A book is a ZIM file; its name is the file name without ``.zim``. Every archive that opens is
searchable; a missing, truncated or non-ZIM file becomes a ``FolioError`` kept in ``errors`` under its
book name and raised only when that book is used, so the other books still work.

A damaged archive that opens (a corrupt cluster: libzim raises ``RuntimeError`` such as "Unexpected
lzma status" or "Data corruption detected" when an entry is read) fails only what it touches: metadata
that cannot be read makes that book an error in ``errors`` at open; an article that cannot be read is a
``FolioError`` naming it (``article``) or is skipped among search candidates (the search fails with
that error only when no candidate could be read), so the other articles and books still answer; a book
whose search skipped an article is kept in ``damaged`` (its reason), so its older edition is searched
too (``nodes/kiwix/candidates.py``) and the answer names the damage.

Limitations: full-text search needs the archive's Xapian index (``FolioError`` otherwise). Suggestions
use the title index; an archive without one still gets libzim's title-order suggestions, and if those
come back empty a prefix scan over the first ``TITLE_SCAN_LIMIT`` entries' titles.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from folio.nodes.backends import mentions_wikipedia
from folio.nodes.backends.html_text import PageText, clean_title, excerpt, page_text
from folio.nodes.core.kiwix_types import Article, Candidate, KiwixBook
from folio.nodes.core.types import FolioError

if TYPE_CHECKING:
    from libzim.reader import Archive, Entry

MAX_REDIRECTS = 10
TITLE_SCAN_LIMIT = 200_000
PAGE_CACHE_SIZE = 256


def raw_suggestion_count(limit: int) -> int:
    """How many raw suggestions to ask for: redirects and duplicates collapse, so ask for more."""
    return max(3 * limit, 40)


def _libzim() -> Any:
    try:
        import libzim.reader
        import libzim.search
        import libzim.suggestion
    except ImportError:  # pragma: no cover - libzim is a core dependency
        raise FolioError("libzim", "python-libzim is not installed: pip install 'libzim>=3.4'") from None
    return libzim


def book_name(path: str | os.PathLike[str]) -> str:
    """A book's name: the ZIM file name without ``.zim``."""
    name = Path(path).name
    return name[: -len(".zim")] if name.lower().endswith(".zim") else name


def open_archive(path: str | os.PathLike[str]) -> Archive:
    """Open one ZIM archive or raise ``FolioError(path, reason)``."""
    libzim = _libzim()
    p = Path(path)
    if not p.exists():
        raise FolioError(str(path), "ZIM file not found")
    if p.is_dir():
        raise FolioError(str(path), "is a directory, not a ZIM file")
    if not p.is_file():  # a FIFO would block libzim's open forever; a device never ends
        raise FolioError(str(path), "not a regular file: only ZIM files are read")
    try:
        return libzim.reader.Archive(p)
    except (RuntimeError, OSError) as exc:
        reason = str(exc).strip().rstrip(".") or type(exc).__name__
        raise FolioError(str(path), f"not a readable ZIM archive ({reason})") from None


def _reason(exc: BaseException) -> str:
    """libzim's message on one line, without its trailing period."""
    return " ".join(str(exc).split()).rstrip(".") or type(exc).__name__


def archive_metadata(archive: Archive, key: str) -> str:
    """One metadata value as text ("" when the archive does not have it)."""
    if key not in archive.metadata_keys:
        return ""
    return bytes(archive.get_metadata(key)).decode("utf-8", "replace").strip()


def kiwix_book(archive: Archive, path: str | os.PathLike[str]) -> KiwixBook:
    """The ``KiwixBook`` describing an open archive."""
    name = book_name(path)
    meta = {key: archive_metadata(archive, key) for key in ("Name", "Title", "Creator", "Source")}
    return KiwixBook(
        name=name,
        title=meta["Title"] or name,
        language=archive_metadata(archive, "Language"),
        description=archive_metadata(archive, "Description"),
        article_count=int(archive.article_count),
        is_wikipedia=mentions_wikipedia(*meta.values()),
        location=str(path),
    )


def resolve_redirects(entry: Entry) -> Entry:
    """Follow redirects to the target entry (at most ``MAX_REDIRECTS`` hops)."""
    for _ in range(MAX_REDIRECTS):
        if not entry.is_redirect:
            return entry
        entry = entry.get_redirect_entry()
    raise FolioError(entry.path, f"more than {MAX_REDIRECTS} redirects")


def title_prefix_paths(
    archive: Archive, term: str, limit: int, max_scan: int = TITLE_SCAN_LIMIT
) -> list[str]:
    """Paths of entries whose title starts with ``term`` (case-insensitive), in title order.

    The fallback for archives without a title index: an exact title lookup, then a scan of the
    entries' titles (at most ``max_scan`` entries).
    """
    folded = term.casefold().strip()
    if not folded or limit <= 0:
        return []
    found: dict[str, str] = {}
    if archive.has_entry_by_title(term):
        exact = archive.get_entry_by_title(term)
        found[exact.path] = exact.title
    for entry_id in range(min(archive.all_entry_count, max_scan)):
        entry = archive._get_entry_by_id(entry_id)
        if clean_title(entry.title).casefold().startswith(folded):
            found.setdefault(entry.path, entry.title)
    ordered = sorted(found, key=lambda p: (clean_title(found[p]).casefold(), p))
    return ordered[:limit]


class _Zim:
    """One open archive with its description and a lock-protected full-text searcher."""

    def __init__(self, archive: Archive, book: KiwixBook) -> None:
        self.archive = archive
        self.book = book
        self.lock = threading.Lock()


class ZimBackend:
    """Kiwix books read in-process from ``.zim`` files.

    Args:
        zim_paths: the ZIM files, in the order books are listed.

    Attributes:
        errors: per-book ``FolioError`` for files that could not be opened, keyed by book name.
        damaged: per-book reason for archives that opened but whose search met an article that could not
            be read (a corrupt cluster), keyed by book name: recorded when first met, kept.
    """

    def __init__(self, zim_paths: Sequence[str | os.PathLike[str]]) -> None:
        self._libzim = _libzim()
        self._zims: dict[str, _Zim] = {}
        self.errors: dict[str, FolioError] = {}
        self.damaged: dict[str, str] = {}
        self._pages: OrderedDict[tuple[str, str], PageText] = OrderedDict()
        self._pages_lock = threading.Lock()
        for path in zim_paths:
            name = book_name(path)
            if name in self._zims or name in self.errors:
                self.errors.setdefault(name, FolioError(str(path), f"duplicate book name {name!r}"))
                continue
            try:
                archive = open_archive(path)
                book = kiwix_book(archive, path)
            except FolioError as exc:
                self.errors[name] = exc
                continue
            except RuntimeError as exc:  # a corrupt cluster under the metadata
                self.errors[name] = FolioError(str(path), f"damaged ZIM archive ({_reason(exc)})")
                continue
            self._zims[name] = _Zim(archive, book)

    def books(self) -> tuple[KiwixBook, ...]:
        """The books that opened, in the order given."""
        return tuple(zim.book for zim in self._zims.values())

    def search(self, book: str, query: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Full-text search of one book; best first, redirects resolved, duplicates removed."""
        zim = self._zim(book)
        if not zim.archive.has_fulltext_index:
            raise FolioError(book, "has no full-text index (use title suggestions)")
        if not query.strip() or limit <= 0:
            return ()
        search_mod = self._libzim.search
        try:
            with zim.lock:
                results = search_mod.Searcher(zim.archive).search(search_mod.Query().set_query(query))
                paths = list(results.getResults(0, limit * 2))
        except RuntimeError as exc:
            raise FolioError(book, f"full-text search failed ({exc})") from None
        return self._candidates(book, paths, "search", limit)

    def suggest(self, book: str, term: str, limit: int = 20) -> tuple[Candidate, ...]:
        """Title suggestions; archives without a title index fall back to title-order lookup."""
        zim = self._zim(book)
        if not term.strip() or limit <= 0:
            return ()
        paths: list[str] = []
        try:
            with zim.lock:
                suggestions = self._libzim.suggestion.SuggestionSearcher(zim.archive).suggest(term)
                paths = list(suggestions.getResults(0, raw_suggestion_count(limit)))
        except RuntimeError:
            paths = []
        if not paths and not zim.archive.has_title_index:
            paths = title_prefix_paths(zim.archive, term, raw_suggestion_count(limit))
        return self._candidates(book, paths, "suggest", limit)

    def article(self, book: str, path: str) -> Article:
        """One article as clean text; a redirect is followed to its target."""
        zim = self._zim(book)
        url = f"zim://{book}/{path}"
        try:
            entry = resolve_redirects(zim.archive.get_entry_by_path(path))
            mimetype = entry.get_item().mimetype
        except KeyError:
            raise FolioError(url, "no such article") from None
        except RuntimeError as exc:
            raise FolioError(url, f"damaged ZIM archive ({_reason(exc)})") from None
        if not mimetype.startswith("text/html"):
            raise FolioError(url, f"not an HTML article ({mimetype})")
        page = self._page(book, entry)
        return Article(
            book=book,
            path=entry.path,
            title=clean_title(entry.title) or page.title or entry.path,
            text=page.text,
            url=f"zim://{book}/{entry.path}",
            sections=page.sections,
        )

    def close(self) -> None:
        """Forget the archives (libzim closes a file when its archive is released)."""
        self._zims.clear()
        with self._pages_lock:
            self._pages.clear()

    def __enter__(self) -> ZimBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- private ---------------------------------------------------------------------------------

    def _zim(self, book: str) -> _Zim:
        if book in self._zims:
            return self._zims[book]
        if book in self.errors:
            raise self.errors[book]
        known = ", ".join(self._zims) or "none"
        raise FolioError(book, f"no such book (open books: {known})")

    def _entries(self, book: str, paths: Sequence[str]) -> Iterator[Entry]:
        """Resolved HTML entries for ``paths``, first occurrence of each target only."""
        archive = self._zims[book].archive
        seen: set[str] = set()
        for path in paths:
            try:
                entry = resolve_redirects(archive.get_entry_by_path(path))
                html = entry.get_item().mimetype.startswith("text/html")
            except (KeyError, FolioError, RuntimeError):
                continue
            if entry.path in seen or not html:
                continue
            seen.add(entry.path)
            yield entry

    def _candidates(self, book: str, paths: Sequence[str], origin: str, limit: int) -> tuple[Candidate, ...]:
        """Candidates for ``paths``; an article of a damaged archive is skipped (its error raised only
        when no candidate could be read)."""
        out: list[Candidate] = []
        damage: FolioError | None = None
        for entry in self._entries(book, paths):
            try:
                page = self._page(book, entry)
            except FolioError as exc:
                damage = damage or exc
                self.damaged.setdefault(book, exc.reason)
                continue
            out.append(
                Candidate(
                    book=book,
                    path=entry.path,
                    title=clean_title(entry.title) or page.title or entry.path,
                    excerpt=excerpt(page),
                    url=f"zim://{book}/{entry.path}",
                    origin=origin,
                )
            )
            if len(out) >= limit:
                break
        if not out and damage is not None:
            raise damage
        return tuple(out)

    def _page(self, book: str, entry: Entry) -> PageText:
        key = (book, entry.path)
        with self._pages_lock:
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key]
        try:
            content = bytes(entry.get_item().content)
        except RuntimeError as exc:  # a corrupt cluster
            raise FolioError(f"zim://{book}/{entry.path}", f"damaged ZIM archive ({_reason(exc)})") from None
        page = page_text(content, title=entry.title)
        with self._pages_lock:
            self._pages[key] = page
            while len(self._pages) > PAGE_CACHE_SIZE:
                self._pages.popitem(last=False)
        return page
