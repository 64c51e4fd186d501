"""``folio sync PATH…``: make the library mirror folders and Calibre libraries.

The plan (``sync_plan``, pure): every book source of the paths (``dataflows.api.book_sources``: files,
folders, Calibre libraries with their metadata) is matched to the library's books by source file. A book
whose file has the size and mtime its descriptor recorded at ingest, and whose Calibre metadata is the
one stored, is unchanged without reading the file; when size or mtime differ the file's sha256 decides
(a touched file is unchanged, an edited one is re-ingested); a new file is added; a library book whose
file lies under a synced folder (or is a synced file) and is no longer among the sources is removed.
A source with a one-line problem (a missing format, a comic) counts as failed and changes nothing; so
does a file that failed to ingest in an earlier sync and has the same size and mtime since (recorded in
``LIBRARY/sync-failures.json``), so a second sync of an unchanged folder writes nothing.

Running it (``run_sync``): a plan with nothing to do returns at once (no lock, no ingest imports: an
unchanged library of 1,000 books syncs in about 2 s, the scaling bench's ``sync_measurement``);
otherwise, under the library's writer lock and with the plan made again there, additions and updates
go through the same parallel per-book ingest as ``folio ingest`` (each book one commit), then
removals, each one transaction; one progress bar over every book of the plan (its total known before
the first book). Killed at any point, the next run's plan holds only what is left: a committed book's
descriptor already records its file's stamp, and a second copy of a book (an update whose id changed, killed
before the old one went) is planned for removal. Removals need ``assume_yes`` or a ``confirm`` that
says yes; ``dry_run`` returns the plan and writes nothing.

Config keys: ``book_formats`` (a Calibre library's format preference). Limitations: a book ingested
before file stamps were recorded (no ``file_sha256`` in its descriptor) is re-ingested once; a file
moved to another folder is removed and added (its embeddings come from the cache).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from folio.dataflows.calibre import BookSource, file_sha256, stored_name
from folio.nodes.backends.progress import Progress
from folio.nodes.core.types import FolioError

FAILURES = "sync-failures.json"  # in the library: files that failed to ingest, by size and mtime
COMPARED = ("title", "authors", "series", "series_index", "tags", "language", "identifiers", "pubdate")


@dataclass
class SyncPlan:
    """What a sync will do: sources to add and update (with the ids they replace), books to remove."""

    add: list[BookSource] = field(default_factory=list)
    update: list[tuple[BookSource, list[str]]] = field(default_factory=list)
    remove: list[tuple[str, str]] = field(default_factory=list)  # (book id, source file)
    unchanged: int = 0
    problems: list[FolioError] = field(default_factory=list)

    @property
    def books(self) -> int:
        """Books the run writes (the progress bar's total)."""
        return len(self.add) + len(self.update) + len(self.remove)

    def lines(self) -> list[str]:
        """The plan, one line per book (``--dry-run``)."""
        out = [f"add {s.path}" for s in self.add]
        out += [f"update {s.path}" for s, _ in self.update]
        out += [f"remove {book_id} ({source})" for book_id, source in self.remove]
        return out


@dataclass
class SyncReport:
    """What a sync did (or, for a dry run, would do)."""

    plan: SyncPlan
    added: int = 0
    updated: int = 0
    removed: int = 0
    errors: list[FolioError] = field(default_factory=list)
    skipped_removals: int = 0
    ingested: list[Any] = field(default_factory=list)  # the StagedBooks added or updated
    removed_ids: list[str] = field(default_factory=list)

    def summary(self, dry_run: bool = False) -> str:
        """The one summary line."""
        failed = len(self.errors) + len(self.plan.problems)
        if dry_run:
            p = self.plan
            return (
                f"sync (dry run): would add {len(p.add)}, update {len(p.update)}, remove {len(p.remove)}; "
                f"{failed} failed, {p.unchanged} unchanged"
            )
        counts = (
            f"added {self.added}, updated {self.updated}, removed {self.removed}, "
            f"failed {failed}, unchanged {self.plan.unchanged}"
        )
        if not (self.added or self.updated or self.removed):
            return f"sync: nothing changed: {counts}"
        return f"sync: {counts}"


def _metadata_changed(source: BookSource, descriptor: Mapping[str, Any]) -> bool:
    given = source.metadata
    return any(
        key in given and given[key] is not None and given[key] != descriptor.get(key) for key in COMPARED
    )


def _file_changed(path: Path, descriptor: Mapping[str, Any]) -> bool:
    """Size and mtime first; the content hash only when they differ (or were never recorded)."""
    try:
        stat = path.stat()
    except OSError:
        return True  # the reader names the problem
    if stat.st_size == descriptor.get("file_size") and stat.st_mtime_ns == descriptor.get("file_mtime_ns"):
        return False
    recorded = descriptor.get("file_sha256")
    if not recorded or stat.st_size != descriptor.get("file_size"):
        return True
    try:
        return file_sha256(path) != recorded
    except OSError:
        return True


def _under(source_file: str, roots: Sequence[tuple[str, bool]]) -> bool:
    return any(
        source_file == root or (is_dir and source_file.startswith(root + os.sep)) for root, is_dir in roots
    )


def sync_plan(
    sources: Sequence[BookSource],
    descriptors: Sequence[Mapping[str, Any]],
    roots: Sequence[tuple[str, bool]],
    failures: Mapping[str, Mapping[str, Any]] | None = None,
) -> SyncPlan:
    """The plan that makes the books of ``roots`` (``(stored path, is a folder)``) mirror ``sources``;
    ``failures``: files that failed to ingest before (stored path -> size, mtime, reason), not tried
    again while their size and mtime stay the same."""
    by_source: dict[str, list[Mapping[str, Any]]] = {}
    for d in descriptors:
        by_source.setdefault(str(d.get("source_file", "")), []).append(d)
    plan = SyncPlan()
    seen: set[str] = set()
    for source in sources:
        if source.path is None:
            plan.problems.append(source.error())
            continue
        name = stored_name(source.path)
        if name in seen:
            continue
        seen.add(name)
        held = by_source.get(name, [])
        failed = (failures or {}).get(name)
        if not held and failed is not None and not _file_changed(source.path, failed):
            plan.problems.append(FolioError(str(source.path), f"{failed['reason']} (unchanged since)"))
        elif not held:
            plan.add.append(source)
            continue
        if not held:
            continue
        fresh = [d for d in held if not _file_changed(source.path, d) and not _metadata_changed(source, d)]
        if fresh:
            plan.unchanged += 1
            plan.remove += [(d["book_id"], name) for d in held if d is not fresh[0]]  # a second copy
        else:
            plan.update.append((source, [d["book_id"] for d in held]))
    plan.remove += [
        (d["book_id"], name)
        for name, held in sorted(by_source.items())
        if name not in seen and _under(name, roots)
        for d in held
    ]
    return plan


def sync_roots(paths: Sequence[str | Path]) -> list[tuple[str, bool]]:
    """Each synced path as ``(stored path, is a folder)``: the books under it are the sync's."""
    out = []
    for raw in paths:
        path = Path(raw).expanduser()
        out.append((stored_name(path), path.is_dir()))
    return out


def sync_progress(total: int, bar: bool) -> Progress:
    """One bar over ``total`` books with an ETA (a terminal, not ``--quiet``), else silence."""
    if not bar or total == 0:
        return Progress()
    from folio.dataflows.parallel import BookProgress

    return BookProgress(total)


def run_sync(
    paths: Sequence[str | Path],
    library: Any = None,
    config: Any = None,
    dry_run: bool = False,
    assume_yes: bool = False,
    confirm: Callable[[str], bool] | None = None,
    bar: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Sync the library with ``paths`` (see the module docstring); ``bar``: one bar over the plan's books
    on stderr, else ``progress`` (chunks embedded, the service's jobs) or silence."""
    from folio.dataflows.api import book_sources, resolve_config, resolve_library

    lib = resolve_library(library)
    cfg = resolve_config(config, {})
    missing = [str(p) for p in paths if not Path(p).expanduser().exists()]
    if missing:
        raise FolioError(missing[0], "no such file or folder")
    roots = sync_roots(paths)
    formats = cfg.get("book_formats")
    failures = read_failures(lib.path)
    report = SyncReport(sync_plan(book_sources(paths, formats), lib.descriptors(), roots, failures))
    if dry_run or not report.plan.books:
        return report  # nothing to write: no lock taken, nothing imported for ingest
    with lib.writer():  # the plan again, under the lock: another writer may have changed the library
        report = SyncReport(sync_plan(book_sources(paths, formats), lib.descriptors(), roots, failures))
        plan = report.plan
        if plan.remove and not assume_yes:
            question = f"remove {len(plan.remove)} book(s) whose files are gone from the library?"
            if confirm is None or not confirm(question):
                report.skipped_removals, plan.remove = len(plan.remove), []
        shown = sync_progress(plan.books, bar) if bar or progress is None else progress
        try:
            _apply(report, lib, cfg, shown)
        finally:
            if shown is not progress:
                shown.close()
        write_failures(lib.path, failures, report)
    return report


def read_failures(library: Path) -> dict[str, dict[str, Any]]:
    """The files that failed to ingest in earlier syncs (``FAILURES`` in the library; none when absent
    or unreadable: they are then tried again)."""
    try:
        data = json.loads((Path(library) / FAILURES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return (
        {str(k): v for k, v in data.items() if isinstance(v, dict) and "reason" in v}
        if isinstance(data, dict)
        else {}
    )


def write_failures(library: Path, failures: Mapping[str, Any], report: SyncReport) -> None:
    """Record the files this sync failed to ingest (with their size and mtime), forget those it ingested;
    written whole (a temporary file renamed), inside the library."""
    kept = {
        k: v
        for k, v in failures.items()
        if k not in {stored_name(s.path) for s in _work(report.plan) if s.path}
    }
    for error in report.errors:
        path = Path(error.source)
        try:
            info = path.stat()
        except OSError:
            continue
        kept[stored_name(path)] = {
            "file_size": info.st_size,
            "file_mtime_ns": info.st_mtime_ns,
            "reason": error.reason,
        }
    target = Path(library) / FAILURES
    if not kept and not target.exists():
        return
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json.dumps(kept, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(temporary, target)


def _work(plan: SyncPlan) -> list[BookSource]:
    return [*plan.add, *(s for s, _ in plan.update)]


def _apply(report: SyncReport, lib: Any, cfg: Mapping[str, Any], progress: Progress) -> None:
    plan = report.plan
    work = _work(plan)
    files = [s.path for s in work if s.path is not None]
    metadata = {str(s.path): s.metadata for s in work if s.metadata}
    results: list[Any] = []
    if files:  # Hamilton and the ingest DAG are imported only when there are books to ingest
        from folio.dataflows.parallel import ingest_books

        results = ingest_books(files, lib, cfg, progress, metadata=metadata)
    replaced = {str(s.path): old for s, old in plan.update}
    removals = list(plan.remove)
    for path, result in zip(files, results, strict=True):
        if isinstance(result, FolioError):
            report.errors.append(result)
            continue
        report.ingested.append(result)
        old = replaced.get(str(path))
        if old is None:
            report.added += 1
        else:
            report.updated += 1
            removals += [(book_id, str(path)) for book_id in old if book_id != result.book_id]
    planned = {book_id for book_id, _ in plan.remove}
    known = set(lib.book_ids()) | {book_id for book_id, _ in lib.damaged_books()}
    for book_id, _ in removals:
        if book_id in known:
            lib.remove(book_id)
            known.discard(book_id)
            report.removed += book_id in planned  # an updated book's old copy is part of its update
            report.removed_ids += [book_id] if book_id in planned else []
        if book_id in planned:
            progress.book_finished(book_id, 0)


def ask_yes(question: str) -> bool:
    """Ask on the terminal; no terminal (a script) is a no."""
    if not sys.stdin.isatty():
        return False
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
