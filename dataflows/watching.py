"""``folio serve --watch PATH…``: folders (and Calibre libraries) kept in sync while the service runs.

A ``FolderWatcher`` queues one sync job per watched path when it starts (the library catches up with what
changed while nobody watched), then watches the paths with ``watchfiles`` (Rust ``notify``: inotify on
Linux, FSEvents on macOS) on a daemon thread. Changes are debounced (``debounce_ms``: a burst of writes,
such as a book being copied or Calibre saving its database, is one batch); each batch queues a sync job
(``Service.sync``: ``dataflows.syncing`` under the writer lock, new and changed books ingested, vanished
ones removed) for each watched path it touches, unless one for that path is already waiting. The jobs
are the service's, so ``/api/jobs`` and the page show them with their progress and what they added
and removed.

Which changes count (``relevant_change``): a file whose suffix ``folio ingest`` reads, anything deleted
(a folder of books may go at once), and a Calibre library's ``metadata.db``; editor swap files, covers
and the library folder itself (when it lies inside a watched folder) are ignored.

Limitations: needs ``watchfiles`` (``pip install 'folio[watch]'``); a network filesystem may not report
changes (a restart syncs anyway); the removals of a watched folder are done without asking (the person
asked for the folder to be mirrored).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from folio.dataflows.calibre import DATABASE
from folio.nodes.core.types import FolioError

DEBOUNCE_MS = 1_600
INSTALL = "pip install 'folio[watch]'"


def checked_watch_paths(paths: Sequence[str]) -> list[Path]:
    """The folders to watch, resolved; one line for a path that is not a folder, or no ``watchfiles``."""
    if importlib.util.find_spec("watchfiles") is None:
        raise FolioError("--watch", f"watching folders needs watchfiles: {INSTALL}")
    out = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise FolioError(str(raw), "not a folder: --watch takes folders (or Calibre libraries)")
        out.append(path.resolve())
    return out


def relevant_change(kind: str, path: Path, suffixes: Iterable[str], library: Path) -> bool:
    """Whether a change (``kind``: added, modified, deleted) of ``path`` can change the library."""
    if path == library or library in path.parents:
        return False
    if path.name == DATABASE:
        return True
    return kind == "deleted" or path.suffix.lower() in set(suffixes)


def touched_roots(
    changes: Iterable[tuple[str, Path]], roots: Sequence[Path], suffixes: Iterable[str], library: Path
) -> list[Path]:
    """The watched ``roots`` that hold a relevant change, in the order given."""
    suffixes = tuple(suffixes)
    hit: set[Path] = set()
    for kind, path in changes:
        if relevant_change(kind, path, suffixes, library):
            hit.update(r for r in roots if path == r or r in path.parents)
    return [r for r in roots if r in hit]


class FolderWatcher:
    """Watches ``roots`` and queues sync jobs on ``service`` (see the module docstring)."""

    def __init__(self, service: Any, roots: Sequence[Path], debounce_ms: int = DEBOUNCE_MS) -> None:
        from folio.dataflows.api import ingestible_suffixes

        self.service = service
        self.roots = list(roots)
        self.debounce_ms = debounce_ms
        self.suffixes = ingestible_suffixes()
        self.library = Path(service.library.path).resolve()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waiting: dict[Path, str] = {}  # root -> its job that has not started yet

    def start(self) -> None:
        for root in self.roots:
            self._queue(root)
        self._thread = threading.Thread(target=self._watch, name="folio-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _queue(self, root: Path) -> None:
        waiting = self._waiting.get(root)
        if waiting is not None and self.service.job(waiting)["state"] == "queued":
            return  # that job will see this change too
        self._waiting[root] = self.service.sync([str(root)]).job_id

    def handle(self, changes: Iterable[tuple[str, Path]]) -> list[Path]:
        """Queue the sync jobs for one debounced batch of changes; the roots queued."""
        roots = touched_roots(changes, self.roots, self.suffixes, self.library)
        for root in roots:
            self._queue(root)
        return roots

    def _watch(self) -> None:
        from watchfiles import watch

        for batch in watch(
            *self.roots,
            debounce=self.debounce_ms,
            stop_event=self._stop,
            raise_interrupt=False,
            recursive=True,
        ):
            self.handle((change.name, Path(path)) for change, path in batch)
