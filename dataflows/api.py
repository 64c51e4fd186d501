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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.dataflows.parallel import ingest_books
from folio.dataflows.registry import execute
from folio.nodes.backends.progress import NullProgress, Progress
from folio.nodes.types import FolioError, Hit, StagedBook

BOOK_SUFFIXES = (".epub", ".txt", ".text", ".md")
SEARCH_MODES = ("lexical", "semantic", "hybrid", "bm25s", "dense_exact")  # the last two are baselines


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
        merged = load_config(None, overrides=dict(config))
        merged.update(overrides)
        return merged
    return load_config(config, overrides=overrides)


def book_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand folders into the book files below them (sorted); plain paths are kept as given."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            out.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in BOOK_SUFFIXES)
            )
        else:
            out.append(path)
    return out


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
    (default), unchanged work is reused from the library's node-result cache.
    """
    lib = resolve_library(library)
    overrides: dict[str, Any] = {"chunk_profile": profile} if profile else {}
    cfg = resolve_config(config, overrides)
    report = IngestReport()
    files = book_files(paths)
    if not files:
        raise FolioError(
            ", ".join(str(p) for p in paths), f"no book files ({', '.join(BOOK_SUFFIXES)}) found"
        )
    with lib.writer():
        results = ingest_books(files, lib, cfg, progress or NullProgress(), cache=cache)
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
) -> list[Hit]:
    """Search the library (or one book, or some chapters) by words, meaning, or both."""
    lib = resolve_library(library)
    overrides: dict[str, Any] = {}
    if mode:
        if mode not in SEARCH_MODES:
            raise FolioError("--mode", f"unknown search mode {mode!r}: use {', '.join(SEARCH_MODES)}")
        overrides["search_mode"] = mode
    if k is not None:
        overrides["search_k"] = int(k)
    cfg = resolve_config(config, overrides)
    stores = lib.stores([lib.resolve_book(book)] if book else None)
    if not stores:
        raise FolioError(str(lib.path), "the library has no books yet: run `folio ingest PATH` first")
    chapter_ids = None
    if chapter is not None:
        chapter_ids = (chapter,) if isinstance(chapter, str) else tuple(chapter)
    result = execute(
        "search",
        cfg,
        ["search_results"],
        inputs={"query": query, "book_stores": tuple(stores), "chapter_ids": chapter_ids},
    )
    return list(result["search_results"])


def books(library: str | Path | Library | None = None) -> list[dict[str, Any]]:
    """The library's books: id, title, author, chapters, chunks."""
    return resolve_library(library).books()
