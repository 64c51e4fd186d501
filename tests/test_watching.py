"""``folio serve --watch`` (dataflows/watching.py): which changes count, debounced batches queue one sync
job per watched folder, and a real watched folder synced through the service's jobs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

try:  # the benchmarks live in bench/ once issue 29's move is merged; before it, in folio.dataflows
    from bench.scaling import small_books, write_book_files
except ModuleNotFoundError:
    from bench.scaling import small_books, write_book_files
from folio.dataflows.watching import FolderWatcher, checked_watch_paths, relevant_change, touched_roots
from folio.nodes.core.types import FolioError
from tests.conftest import DATA_DIR

SUFFIXES = (".epub", ".txt")


def test_only_book_files_deletions_and_calibre_databases_count(tmp_path: Path) -> None:
    library = tmp_path / "books" / ".folio"
    assert relevant_change("added", tmp_path / "books/a.epub", SUFFIXES, library)
    assert relevant_change("modified", tmp_path / "books/A.TXT", SUFFIXES, library)
    assert relevant_change("deleted", tmp_path / "books/old-folder", SUFFIXES, library)
    assert relevant_change("modified", tmp_path / "calibre/metadata.db", SUFFIXES, library)
    assert not relevant_change("added", tmp_path / "books/.a.epub.swp", SUFFIXES, library)
    assert not relevant_change("added", tmp_path / "books/cover.jpg", SUFFIXES, library)
    assert not relevant_change("modified", library / "library.sqlite", SUFFIXES, library)  # its own writes


def test_a_batch_touches_the_watched_roots_that_hold_its_changes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    changes = [("added", a / "x/book.epub"), ("added", a / "cover.jpg"), ("modified", tmp_path / "c/z.txt")]
    assert touched_roots(changes, [a, b], SUFFIXES, tmp_path / "lib") == [a]
    assert touched_roots([("deleted", b)], [a, b], SUFFIXES, tmp_path / "lib") == [b]


def test_watch_paths_must_be_folders(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    with pytest.raises(FolioError, match="not a folder"):
        checked_watch_paths([str(tmp_path / "file.txt")])
    assert checked_watch_paths([str(tmp_path)]) == [tmp_path.resolve()]


class RecordingService:
    """Records the sync jobs a watcher queues (every job stays queued)."""

    def __init__(self, library: Path) -> None:
        self.library = SimpleNamespace(path=library)
        self.synced: list[list[str]] = []
        self.changed = threading.Event()

    def sync(self, paths: list[str]) -> SimpleNamespace:
        self.synced.append(paths)
        self.changed.set()
        return SimpleNamespace(job_id=f"sync-{len(self.synced)}")

    def job(self, job_id: str) -> dict:
        return {"state": "queued"}


def test_the_watcher_syncs_at_start_and_a_burst_of_changes_queues_nothing_while_a_job_waits(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "books"
    folder.mkdir()
    service = RecordingService(tmp_path / "library")
    watcher = FolderWatcher(service, [folder.resolve()], debounce_ms=200)
    watcher.start()
    try:
        assert service.synced == [[str(folder.resolve())]]  # the catch-up sync
        watcher._waiting.clear()  # as if the first job had started
        service.changed.clear()
        time.sleep(0.3)  # the watch is running
        write_book_files(small_books(DATA_DIR, 3, words=50), folder)
        assert service.changed.wait(10), "no sync job for new books"
        time.sleep(0.6)
        assert service.synced[1:] == [[str(folder.resolve())]]  # one job for the burst, while it waits
    finally:
        watcher.stop()


# --- a real watched folder (loads the model) -------------------------------------------------------------
@pytest.fixture
def watched_library(tmp_path: Path) -> Path:
    return tmp_path / "library"


def test_a_watched_folder_is_mirrored_by_jobs_the_api_lists(tmp_path: Path, watched_library: Path) -> None:
    from folio.dataflows.service import Service

    folder = tmp_path / "books"
    files = write_book_files(small_books(DATA_DIR, 2, words=150), folder)
    service = Service(watched_library)
    watcher = FolderWatcher(service, [folder.resolve()], debounce_ms=300)
    watcher.start()
    try:
        first = service.wait(service.jobs()[0]["job_id"], timeout=600)
        assert first["kind"] == "sync" and first["state"] == "done", first
        assert first["summary"] == "sync: added 2, updated 0, removed 0, failed 0, unchanged 0"
        files[0].unlink()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(service.jobs()) < 2:
            time.sleep(0.1)
        second = service.wait(service.jobs()[0]["job_id"], timeout=600)
        assert second["summary"] == "sync: added 0, updated 0, removed 1, failed 0, unchanged 1", second
        assert [b["source_file"] for b in service.books()] == [str(files[1].resolve())]
    finally:
        watcher.stop()
        service.close()


def test_serve_watch_of_a_file_is_one_line_before_anything_loads(tmp_path: Path) -> None:
    from tests.conftest import run_folio
    from tests.servers import free_port

    book = tmp_path / "book.txt"
    book.write_text("A\n\nB.\n", encoding="utf-8")
    out = run_folio(
        "serve", "--library", str(tmp_path / "lib"), "--port", str(free_port()), "--watch", str(book)
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.strip().splitlines() == [
        f"folio: {book}: not a folder: --watch takes folders (or Calibre libraries)"
    ]
    assert not (tmp_path / "lib").exists()
