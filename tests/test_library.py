"""The library directory: atomic swap, crash recovery, identical ids, bad input that fails alone."""

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from folio.dataflows.api import ingest
from folio.dataflows.library import Library
from folio.nodes.core.types import FolioError
from folio.nodes.ingest import vectors
from tests.conftest import ALICE_EPUB, BOOKS, REPO_DIR, run_folio


def _snapshot(path: Path) -> dict[str, str]:
    """The library's rows (every table of library.sqlite), its vectors files, and the catalog rows."""
    out = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("vectors-*.usearch*"))
    }
    con = sqlite3.connect(f"file:{path / 'library.sqlite'}?mode=ro", uri=True)
    try:
        for table in ("meta", "books", "chapters", "chunks", "windows"):
            rows = con.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            out[f"library.{table}"] = hashlib.sha256(repr(rows).encode()).hexdigest()
    finally:
        con.close()
    con = duckdb.connect(str(path / "catalog.duckdb"), read_only=True)
    try:
        out["catalog.books"] = repr(
            con.execute("SELECT book_id, content_hash, n_chunks FROM books ORDER BY 1").fetchall()
        )
        out["catalog.chapters"] = repr(
            con.execute("SELECT book_id, chapter_id, ord FROM chapters ORDER BY 1, 3").fetchall()
        )
        out["catalog.chunks"] = repr(
            con.execute('SELECT book_id, chunk_id, start, "end" FROM chunks ORDER BY 1, 2').fetchall()
        )
    finally:
        con.close()
    return out


def test_same_book_ingested_twice_yields_identical_ids(alice_copy):
    lib = Library(alice_copy)
    before = lib.descriptors()
    chunk_ids = [h.chunk_id for h in lib.store(before[0]["book_id"]).chunks_in()]
    lib.close()
    report = ingest([ALICE_EPUB], library=alice_copy)
    assert report.ok
    after = Library(alice_copy)
    assert [b["book_id"] for b in after.descriptors()] == [b["book_id"] for b in before]
    assert after.descriptors()[0]["chapters"] == before[0]["chapters"]
    assert [h.chunk_id for h in after.store(before[0]["book_id"]).chunks_in()] == chunk_ids


def test_offsets_round_trip_for_every_chunk(alice_library):
    lib = Library(alice_library)
    (book,) = lib.descriptors()
    store = lib.store(book["book_id"])
    chunks = store.chunks_in()
    assert len(chunks) == book["n_chunks"] > 5
    for chunk in chunks:
        assert store.chapter_text(chunk.chapter_id)[chunk.start : chunk.end] == chunk.text


def test_failed_ingest_leaves_the_library_exactly_as_it_was(alice_copy, monkeypatch):
    before = _snapshot(alice_copy)

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(vectors, "_write_index", explode)
    books = [ALICE_EPUB, BOOKS / "txt/pg35_wells_the-time-machine.txt"]
    report = ingest(books, library=alice_copy, config={"workers": 1})  # in-process, so the patch applies
    assert len(report.errors) == 2 and not report.ingested
    assert "disk on fire" in str(report.errors[0]) and "carroll_alice" in str(report.errors[0])
    assert _snapshot(alice_copy) == before
    assert not any((alice_copy / "staging").iterdir())


def test_a_vectors_file_no_commit_names_is_removed_on_next_open(alice_copy):
    before = _snapshot(alice_copy)
    (current,) = alice_copy.glob("vectors-*.usearch")
    generation = int(current.stem.split("-")[1])
    orphan = alice_copy / f"vectors-{generation + 1}.usearch"  # a crash after writing it, before the commit
    orphan.write_bytes(current.read_bytes())
    with Library(alice_copy).writer():
        pass
    assert not orphan.exists()
    assert _snapshot(alice_copy) == before


def test_killed_ingest_leaves_the_library_intact(alice_copy, tmp_path):
    before = _snapshot(alice_copy)
    book = BOOKS / "txt/pg35_wells_the-time-machine.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "folio.dataflows.cli",
            "ingest",
            str(book),
            "--library",
            str(alice_copy),
            "--quiet",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    staged = None
    while time.time() < deadline and proc.poll() is None:
        staged = next((alice_copy / "staging").glob("*/book.sqlite"), None)
        if staged is not None:
            break
        time.sleep(0.05)
    assert staged is not None, "ingest never reached the indexing stage"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _snapshot(alice_copy) == before
    with Library(alice_copy).writer():
        pass
    assert not any((alice_copy / "staging").iterdir())
    assert _snapshot(alice_copy) == before


def test_bad_files_fail_alone_with_one_line_each(alice_copy, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "picture.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    truncated = tmp_path / "truncated.epub"
    truncated.write_bytes(ALICE_EPUB.read_bytes()[:5000])
    missing = tmp_path / "nope.epub"
    result = run_folio(
        "ingest",
        str(empty),
        str(binary),
        str(truncated),
        str(missing),
        str(ALICE_EPUB),
        "--library",
        str(alice_copy),
        "--quiet",
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("folio: ")]
    assert len(lines) == 4, result.stderr
    for bad, line in zip((empty, binary, truncated, missing), lines, strict=True):
        assert str(bad) in line
    assert "Traceback" not in result.stderr
    assert len(Library(alice_copy).book_ids()) == 1


def test_books_json_lists_id_title_author_chapters_chunks(alice_library):
    result = run_folio("books", "--library", str(alice_library), "--json")
    assert result.returncode == 0
    (row,) = json.loads(result.stdout)
    assert row["title"].startswith("Alice")
    assert row["chapters"] == 10 and row["chunks"] > 5
    assert row["author"]


def test_two_writers_are_refused_clearly(alice_copy):
    lib = Library(alice_copy)
    with lib.writer(), pytest.raises(FolioError, match="another ingest"), Library(alice_copy).writer():
        pass


def test_catalog_holds_books_chapters_and_chunk_metadata(alice_library):
    lib = Library(alice_library)
    (book,) = lib.descriptors()
    con = duckdb.connect(str(alice_library / "catalog.duckdb"), read_only=True)
    try:
        assert (
            con.execute("SELECT count(*) FROM chapters WHERE book_id = ?", [book["book_id"]]).fetchone()[0]
            == 10
        )
        rows = con.execute(
            'SELECT chunk_id, start, "end" FROM chunks WHERE book_id = ? ORDER BY ordinal', [book["book_id"]]
        ).fetchall()
    finally:
        con.close()
    assert [(h.chunk_id, h.start, h.end) for h in lib.store(book["book_id"]).chunks_in()] == rows
