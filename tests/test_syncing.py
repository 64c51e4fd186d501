"""``folio sync`` (dataflows/syncing.py): the plan (pure, on real files), then real runs: twice, after
edits, removals asked for, and killed with SIGKILL mid-run then finished."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from folio.dataflows.calibre import BookSource, file_stamp, stored_name

try:  # the benchmarks live in bench/ once issue 29's move is merged; before it, in folio.dataflows
    from bench.scaling import small_books, sync_measurement, write_book_files
except ModuleNotFoundError:
    from bench.scaling import small_books, sync_measurement, write_book_files
from folio.dataflows.syncing import SyncPlan, SyncReport, sync_plan, sync_roots
from tests.conftest import DATA_DIR, REPO_DIR, run_folio


def descriptor(path: Path, book_id: str, **more) -> dict:
    return {"book_id": book_id, "source_file": stored_name(path), **file_stamp(path), **more}


@pytest.fixture
def folder(tmp_path: Path) -> list[Path]:
    return write_book_files(small_books(DATA_DIR, 4, words=200), tmp_path / "books")


def test_an_unchanged_folder_plans_nothing_without_hashing(folder: list[Path], monkeypatch) -> None:
    import folio.dataflows.syncing as syncing

    held = [descriptor(p, f"b{i}") for i, p in enumerate(folder)]
    monkeypatch.setattr(syncing, "file_sha256", lambda path: pytest.fail("hashed an unchanged file"))
    plan = sync_plan([BookSource(str(p), p) for p in folder], held, sync_roots([folder[0].parent]))
    assert (plan.add, plan.update, plan.remove, plan.unchanged) == ([], [], [], 4)


def test_a_touched_file_is_unchanged_an_edited_one_updated_a_new_one_added_a_gone_one_removed(
    folder: list[Path],
) -> None:
    held = [descriptor(p, f"b{i}") for i, p in enumerate(folder)]
    touched, edited, gone = folder[0], folder[1], folder[2]
    os.utime(touched, ns=(time.time_ns(), time.time_ns() + 10**9))  # same bytes, new mtime
    edited.write_text(edited.read_text(encoding="utf-8") + "\nA new last line.\n", encoding="utf-8")
    gone.unlink()
    new = folder[0].parent / "new-book.txt"
    new.write_text("New\n\nSome text of a new book.\n", encoding="utf-8")
    outside = {"book_id": "elsewhere", "source_file": "/somewhere/else.epub"}
    sources = [BookSource(str(p), p) for p in folder[0].parent.glob("*.txt")]
    plan = sync_plan(sources, [*held, outside], sync_roots([folder[0].parent]))
    assert [s.path for s in plan.add] == [new]
    assert [(s.path, old) for s, old in plan.update] == [(edited, ["b1"])]
    assert plan.remove == [("b2", held[2]["source_file"])]  # not "elsewhere", outside the folder
    assert plan.unchanged == 2 and plan.books == 3


def test_calibre_metadata_changes_update_a_book_and_a_second_copy_is_removed(folder: list[Path]) -> None:
    path = folder[0]
    held = [descriptor(path, "old-id", title="Old title"), descriptor(path, "new-id", title="New title")]
    plan = sync_plan([BookSource(str(path), path, {"title": "New title"})], held, sync_roots([path]))
    assert plan.unchanged == 1 and plan.remove == [("old-id", stored_name(path))]
    renamed = sync_plan([BookSource(str(path), path, {"title": "Third"})], held[:1], sync_roots([path]))
    assert [old for _, old in renamed.update] == [["old-id"]]


def test_a_source_with_a_problem_fails_alone_and_the_summary_is_one_line() -> None:
    problem = BookSource("lib#3 comic", None, problem="a comic archive (CBR)")
    plan = sync_plan([problem], [], [])
    assert [str(e) for e in plan.problems] == ["lib#3 comic: a comic archive (CBR)"]
    report = SyncReport(SyncPlan(unchanged=5, problems=plan.problems))
    assert report.summary() == "sync: nothing changed: added 0, updated 0, removed 0, failed 1, unchanged 5"
    report.added = 2
    assert report.summary() == "sync: added 2, updated 0, removed 0, failed 1, unchanged 5"


# --- real runs (load the model) ------------------------------------------------------------
def library_books(lib: Path) -> list[tuple[str, str]]:
    rows = json.loads(run_folio("books", "--json", "--library", str(lib)).stdout or "[]")
    return sorted((r["source_file"], r["book_id"]) for r in rows)


@pytest.fixture
def sync_library(tmp_path: Path) -> Path:
    """A new library folder (the ``_library`` name marks the tests that use it ``model``)."""
    return tmp_path / "library"


def test_sync_twice_then_edits_then_removal_asked_for(sync_library: Path, folder: list[Path]) -> None:
    lib = sync_library
    first = run_folio("sync", str(folder[0].parent), "--library", str(lib))
    assert first.returncode == 0, first.stderr
    assert (
        first.stdout.strip().splitlines()[-1] == "sync: added 4, updated 0, removed 0, failed 0, unchanged 0"
    )
    second = run_folio("sync", str(folder[0].parent), "--library", str(lib))
    assert (
        second.stdout.strip() == "sync: nothing changed: added 0, updated 0, removed 0, failed 0, unchanged 4"
    )
    before = library_books(lib)
    folder[1].write_text(
        folder[1].read_text(encoding="utf-8") + "\nOne more sentence here.\n", encoding="utf-8"
    )
    folder[2].unlink()
    dry = run_folio("sync", str(folder[0].parent), "--dry-run", "--library", str(lib))
    assert f"update {folder[1]}" in dry.stdout and "remove " in dry.stdout
    assert library_books(lib) == before  # a dry run writes nothing
    asked = run_folio("sync", str(folder[0].parent), "--library", str(lib))  # no terminal: removals not done
    assert "sync: added 0, updated 1, removed 0, failed 0, unchanged 2" in asked.stdout
    assert "--yes" in asked.stderr and len(library_books(lib)) == 4
    done = run_folio("sync", str(folder[0].parent), "--yes", "--library", str(lib))
    assert done.stdout.strip() == "sync: added 0, updated 0, removed 1, failed 0, unchanged 3"
    assert sorted(s for s, _ in library_books(lib)) == sorted(str(p.resolve()) for p in folder if p.exists())


def _committed(lib: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{lib / 'library.sqlite'}?mode=ro", uri=True, timeout=0.1)
        try:
            return int(con.execute("SELECT count(*) FROM books").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _sync_killed_mid_run(root: Path, lib: Path, total: int) -> int:
    """``folio sync ROOT --yes`` SIGKILLed once 2 books are committed; how many were committed then."""
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    command = [sys.executable, "-m", "folio.dataflows.cli", "sync", str(root), "--yes"]
    proc = subprocess.Popen(
        [*command, "--library", str(lib)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline and _committed(lib) < 2:
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no clean-up runs
    proc.wait()
    killed_at = _committed(lib)
    assert 0 < killed_at < total, "the kill should land mid-run"
    return killed_at


def test_sync_killed_mid_run_then_rerun_gives_every_book_once_and_a_healthy_library(
    tmp_path: Path, sync_library: Path
) -> None:
    files = write_book_files(small_books(DATA_DIR, 6, words=200), tmp_path / "books")
    lib = sync_library
    killed_at = _sync_killed_mid_run(files[0].parent, lib, len(files))
    rerun = run_folio("sync", str(files[0].parent), "--yes", "--library", str(lib))
    assert rerun.returncode == 0, rerun.stderr
    last = rerun.stdout.strip().splitlines()[-1]
    assert last.startswith(f"sync: added {len(files) - killed_at}, updated 0, removed 0, failed 0"), last
    books = library_books(lib)
    assert sorted(s for s, _ in books) == sorted(str(p.resolve()) for p in files)  # every book once
    doctor = run_folio("doctor", "--library", str(lib))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_a_calibre_library_synced_killed_mid_run_then_rerun_gives_every_book_once(sync_library: Path) -> None:
    """The real Calibre library of ../shared/data/formats: its readable books, each once, under its
    Calibre title; the two it cannot read named again; metadata.db byte-identical; doctor healthy."""
    import hashlib

    from folio.dataflows.api import book_sources

    root = DATA_DIR / "formats" / "calibre" / "calibre-web-test-library"
    database = hashlib.sha256((root / "metadata.db").read_bytes()).hexdigest()
    sources = [s for s in book_sources([root]) if s.path is not None]
    lib = sync_library
    killed_at = _sync_killed_mid_run(root, lib, len(sources))
    rerun = run_folio("sync", str(root), "--yes", "--library", str(lib))
    assert "Traceback" not in rerun.stderr and rerun.stderr.startswith("folio: "), rerun.stderr
    last = rerun.stdout.strip().splitlines()[-1]
    books = json.loads(run_folio("books", "--json", "--library", str(lib)).stdout)
    assert last.startswith(f"sync: added {len(books) - killed_at}, updated 0, removed 0, failed "), last
    files = [b["source_file"] for b in books]
    assert len(files) == len(set(files)) and len(books) >= len(sources) - 1  # every book once
    titles = {s.metadata["title"]: s.metadata["authors"] for s in sources}
    assert all(titles[b["title"]] == b["authors"] for b in books)
    assert sum("comicdemo" in line for line in rerun.stderr.splitlines()) == 1
    assert hashlib.sha256((root / "metadata.db").read_bytes()).hexdigest() == database
    doctor = run_folio("doctor", "--library", str(lib))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_the_sync_measurement_syncs_an_unchanged_generated_library_without_changing_it(
    tmp_path: Path,
) -> None:
    result = sync_measurement(DATA_DIR, tmp_path, n=30)  # make bench (scaling section) runs 1,000 books
    assert (
        result["cli_summary"]
        == "sync: nothing changed: added 0, updated 0, removed 0, failed 0, unchanged 30"
    )
    assert result["plan_unchanged"] == result["plan_after_touch_unchanged"] == 30
    assert set(result) >= {"cli_sync_seconds", "plan_seconds", "meets_target"}


def test_a_fifo_or_an_oversized_file_gets_no_stamp_and_is_never_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert file_stamp(fifo) == {}  # opening it would block
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 100)
    assert file_stamp(big, max_bytes=99) == {}
    assert file_stamp(big)["file_size"] == 100


def test_a_file_that_failed_is_not_tried_again_until_it_changes(folder: list[Path]) -> None:
    bad = folder[0]
    info = bad.stat()
    failures = {
        stored_name(bad): {"file_size": info.st_size, "file_mtime_ns": info.st_mtime_ns, "reason": "nope"}
    }
    plan = sync_plan([BookSource(str(bad), bad)], [], sync_roots([bad]), failures)
    assert plan.add == [] and [str(e) for e in plan.problems] == [f"{bad}: nope (unchanged since)"]
    bad.write_text("Fixed\n\nNow it is a readable book.\n", encoding="utf-8")
    retried = sync_plan([BookSource(str(bad), bad)], [], sync_roots([bad]), failures)
    assert [s.path for s in retried.add] == [bad] and retried.problems == []


def test_one_bar_over_the_whole_plan_has_its_total_before_the_first_book() -> None:
    from folio.dataflows.parallel import BookProgress
    from folio.dataflows.syncing import sync_progress

    bar = sync_progress(7, bar=True)
    try:
        assert isinstance(bar, BookProgress) and bar._bar.total == 7 and bar.books_done == 0
        bar.book_done(3)
        assert bar.books_done == 1 and bar.chunks_done == 3
    finally:
        bar.close()
    assert not isinstance(sync_progress(7, bar=False), BookProgress)  # --quiet, or not a terminal
