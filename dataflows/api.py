"""The public Python API: ``ingest``, ``search`` and ``books`` over a library directory.

    from folio.dataflows import ingest, search
    report = ingest(["moby-dick.epub"], library="~/folio")
    hits = search("white whale", library="~/folio", mode="hybrid", k=5)

Every call goes through the DAG registry (``dataflows.registry``): drivers memoised per config
switches, settings passed as inputs; the encoder and open book stores are shared per process, so warm
calls pay no load time. ``resolve_library`` and ``resolve_config`` turn the ``library``/``config``
arguments every front (API, evaluation, experiments) accepts into a ``Library`` and a full config.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from folio.dataflows.calibre import BookSource, calibre_books, has_sidecars, is_calibre_library, sidecar_books
from folio.dataflows.config import load_config
from folio.dataflows.filtering import BookFilter, matching_ids
from folio.dataflows.library import Library
from folio.nodes.backends.progress import NullProgress, Progress
from folio.nodes.core.concept_lookup import concept_map_lookup
from folio.nodes.core.types import ConceptMatches, FolioError, Hit, StagedBook
from folio.nodes.readers.common import located_hit
from folio.nodes.readers.table import BOOK_SUFFIXES

SEARCH_MODES = ("lexical", "semantic", "hybrid", "bm25s", "dense_exact")  # the last two are baselines
MAX_CHAPTERS = 10_000  # the most distinct chapters one search is restricted to


@dataclass
class IngestReport:
    """What an ingest did: books installed and one-line errors for the files that failed."""

    ingested: list[StagedBook] = field(default_factory=list)
    errors: list[FolioError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def resolve_library(library: str | Path | Library | None) -> Library:
    """A ``Library`` from a path (``None``: the default library) or the library itself."""
    return library if isinstance(library, Library) else Library(library)


def resolve_config(
    config: str | Path | Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The full config: defaults ← ``config`` (a YAML file, or a mapping of keys) ← ``overrides``."""
    if isinstance(config, Mapping):
        return load_config(None, overrides={**config, **overrides})
    return load_config(config, overrides=overrides)


def book_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand folders into the book files below them (sorted); plain paths are kept as given.

    Inside a folder only regular files are taken (FIFOs, devices and sockets are left out), symlinked
    folders are not entered, and a symlink whose target lies outside the folder is not followed.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        out.extend(_folder_books(path) if _is_dir(path) else [path])
    return out


def ingestible_suffixes() -> frozenset[str]:
    """The file suffixes ``folio ingest`` reads (what a Calibre library's format choice asks)."""
    return frozenset(BOOK_SUFFIXES)


def book_sources(paths: Iterable[str | Path], formats: Sequence[str] | None = None) -> list[BookSource]:
    """What ``paths`` name, as books to ingest with their metadata (``dataflows.calibre``): a Calibre
    library (a folder holding ``metadata.db``) by its database, a folder of ``metadata.opf`` sidecars by
    them, any other folder and file as in ``book_files``; ``formats``: the Calibre format preference."""
    from folio.dataflows.calibre import DEFAULT_FORMATS

    preference = tuple(formats or DEFAULT_FORMATS)
    out: list[BookSource] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not _is_dir(path):
            out.append(BookSource(str(path), path))
        elif is_calibre_library(path):
            out.extend(calibre_books(path, preference, ingestible_suffixes()))
        elif has_sidecars(path):
            out.extend(sidecar_books(path, preference, ingestible_suffixes(), _folder_books(path)))
        else:
            out.extend(BookSource(str(f), f) for f in _folder_books(path))
    return out


def _is_dir(path: Path) -> bool:
    """``path.is_dir()``, False for a path the system refuses (a name too long): it then fails alone, as
    a file, with its reason."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _folder_books(folder: Path) -> list[Path]:
    """The book files below ``folder`` that stay inside it (see ``book_files``)."""
    root = folder.resolve()
    found: list[Path] = []
    for directory, _, names in os.walk(folder):  # followlinks=False: symlinked folders are not entered
        for name in names:
            path = Path(directory) / name
            if path.suffix.lower() not in BOOK_SUFFIXES or not path.is_file():
                continue
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                continue
            found.append(path)
    return sorted(found)


def ingest(
    paths: Sequence[str | Path],
    library: str | Path | Library | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    profile: str | None = None,
    progress: Progress | None = None,
    cache: bool = True,
) -> IngestReport:
    """Ingest books into the library, one atomic swap per book; a bad file fails alone.

    Folders expand to the books below them; several books run in parallel on the config's
    ``executor`` (``dataflows.parallel``), one book or ``workers: 1`` in-process. With ``cache``
    (default), unchanged work is reused from the library's node-result cache and windows already
    encoded from its window-embedding cache; ``cache=False`` computes every node and window afresh.
    """
    from folio.dataflows.parallel import ingest_books  # Hamilton's driver: not for `folio books`

    lib = resolve_library(library)
    overrides: dict[str, Any] = {"chunk_profile": profile} if profile else {}
    cfg = resolve_config(config, overrides)
    report = IngestReport()
    sources = book_sources(paths, cfg.get("book_formats"))
    if not sources:
        raise FolioError(
            ", ".join(str(p) for p in paths), f"no book files ({', '.join(BOOK_SUFFIXES)}) found"
        )
    report.errors.extend(s.error() for s in sources if s.path is None)
    files = [s.path for s in sources if s.path is not None]
    metadata = {str(s.path): s.metadata for s in sources if s.path is not None and s.metadata}
    with lib.writer():
        results = ingest_books(files, lib, cfg, progress or NullProgress(), cache=cache, metadata=metadata)
    for result in results:
        if isinstance(result, FolioError):
            report.errors.append(result)
        else:
            report.ingested.append(result)
    return report


def search(
    query: str,
    library: str | Path | Library | None = None,
    book: str | None = None,
    chapter: str | Sequence[str] | None = None,
    mode: str | None = None,
    k: int | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    filters: BookFilter | Mapping[str, Any] | None = None,
) -> list[Hit]:
    """Search the library (or one book, or some chapters, or the books ``filters`` match: see
    ``dataflows.filtering``) by words, meaning, or both."""
    from folio.dataflows.registry import execute  # Hamilton's driver: not for `folio books`

    if not query.strip():  # as `folio ask` and the service: no search of nothing (meaning would rank all)
        raise FolioError("query", "empty query")
    lib = resolve_library(library)
    overrides: dict[str, Any] = {}
    if mode:
        if mode not in SEARCH_MODES:
            raise FolioError("--mode", f"unknown search mode {mode!r}: use {', '.join(SEARCH_MODES)}")
        overrides["search_mode"] = mode
    if k is not None:
        overrides["search_k"] = int(k)
    cfg = resolve_config(config, overrides)
    stores = lib.stores(filtered_ids(lib, [lib.resolve_book(book)] if book else None, filters))
    if not stores:
        raise FolioError(str(lib.path), "the library has no books yet: run `folio ingest PATH` first")
    chapter_ids = None
    if chapter is not None:
        chapter_ids = (chapter,) if isinstance(chapter, str) else tuple(dict.fromkeys(chapter))
        if len(chapter_ids) > MAX_CHAPTERS:
            raise FolioError("--chapter", f"at most {MAX_CHAPTERS:,} chapters (got {len(chapter_ids):,})")
    result = execute(
        "search",
        cfg,
        ["search_results"],
        inputs={
            "query": query,
            "book_stores": tuple(stores),
            "chapter_ids": chapter_ids,
            "model_cache_dir": str(lib.model_cache_dir),
        },
    )
    books = {store.book_id: store.descriptor for store in stores}
    return [located_hit(h, books[h.book_id]) if h.book_id in books else h for h in result["search_results"]]


def concept_matches(
    query: str, library: str | Path | Library | None = None, book: str | None = None, k: int = 10
) -> list[tuple[str, ConceptMatches, dict[str, str]]]:
    """``(book id, matches, chapter titles)`` of a concept-map lookup in one book (or every book)."""
    lib = resolve_library(library)
    book_ids = [lib.resolve_book(book)] if book else lib.book_ids()
    if not book_ids:
        raise FolioError(str(lib.path), "the library has no books yet: run `folio ingest PATH` first")
    out = []
    for book_id in book_ids:
        concept_map = lib.concept_map(book_id)
        if concept_map is None:
            if book:  # the one book asked for
                raise FolioError(book_id, "no concept map: re-ingest the book")
            continue  # every book: the others answer (``unmapped_books`` names this one)
        out.append((book_id, concept_map_lookup(concept_map, query, limit=k), lib.store(book_id).titles))
    return out


def unmapped_books(library: str | Path | Library | None = None) -> list[str]:
    """The books whose concept map is missing or cannot be read (left out of a lookup of every book)."""
    lib = resolve_library(library)
    return [book_id for book_id in lib.book_ids() if lib.concept_map(book_id) is None]


def concept_rows(
    query: str, library: str | Path | Library | None = None, book: str | None = None, k: int = 10
) -> list[dict[str, Any]]:
    """The matches of ``concept_matches`` as JSON rows (``folio concepts --json``), best first per book."""
    rows = []
    for book_id, found, titles in concept_matches(query, library, book, k):
        for match in sorted([*found.entities, *found.themes, *found.events], key=lambda m: -m.score):
            row: dict[str, Any] = {"book_id": book_id}
            row.update({f.name: getattr(match, f.name) for f in dataclasses.fields(match)})
            row["chapter_titles"] = [titles.get(c, c) for c in match.chapter_ids]
            rows.append(row)
    return rows


def books(
    library: str | Path | Library | None = None, filters: BookFilter | Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The library's books (id, title, authors, series, tags, language, format, source, chapters,
    chunks), those ``filters`` match when given."""
    rows = resolve_library(library).books()
    book_filter = filters if isinstance(filters, BookFilter) else BookFilter.of(filters or {})
    keep = set(matching_ids(rows, book_filter)) if book_filter else None
    return [r for r in rows if keep is None or r["book_id"] in keep]


def filtered_ids(
    lib: Library, book_ids: Sequence[str] | None, filters: BookFilter | Mapping[str, Any] | None
) -> list[str] | None:
    """``book_ids`` (None: every book) narrowed to the books ``filters`` match (None: no filter)."""
    book_filter = filters if isinstance(filters, BookFilter) else BookFilter.of(filters or {})
    if not book_filter:
        return list(book_ids) if book_ids is not None else None
    descriptors = [d for d in lib.descriptors() if book_ids is None or d["book_id"] in book_ids]
    return matching_ids(descriptors, book_filter)
