"""The fullsize bench's books and its ingest (issue 30): books recombined from whole real chapters parse
back into those chapters, and a real ingest killed with SIGKILL mid-run and run again ingests each book
exactly once. The long measurements themselves are ``make bench BENCH_ARGS="--only fullsize"``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from bench.fullsize_bench import (
    BooksDone,
    WordsBar,
    added_book,
    fullsize_books,
    pending_books,
    real_ingest,
    write_fullsize_book,
)
from folio.dataflows.library import Library
from folio.nodes.ingest.parsing import manifest, parsed_book
from tests.conftest import BOOKS, REPO_DIR


def chapters_of(path: Path) -> list[tuple[str, str]]:
    return [(c.title, c.text) for c in manifest(parsed_book(str(path))).chapters]


@pytest.fixture(scope="module")
def real_chapters() -> list[tuple[str, str]]:
    """Whole chapters of two shared plain-text books (Alice, The Time Machine)."""
    out = []
    for name in ("pg11_carroll_alices-adventures-in-wonderland.txt", "pg35_wells_the-time-machine.txt"):
        out += [c for c in chapters_of(BOOKS / "txt" / name) if len(c[1].split()) >= 800]
    assert len(out) >= 15
    return out


def test_recombined_books_are_whole_real_chapters_and_parse_back_into_them(real_chapters, tmp_path):
    books = fullsize_books(real_chapters, 3, words=6000)
    assert len({b.chapters for b in books}) == 3  # distinct books
    for book in books:
        assert 6000 <= book.words < 6000 + max(len(t.split()) for _, t in real_chapters)
        assert len(set(book.chapters)) == len(book.chapters)  # no chapter twice in a book
        assert set(book.chapters) <= set(real_chapters)  # whole chapters, unchanged
        parsed = chapters_of(write_fullsize_book(book, tmp_path))
        assert [" ".join(t.split()) for _, t in parsed] == [" ".join(t.split()) for _, t in book.chapters]


def test_the_added_book_is_a_new_book_not_one_the_library_holds(real_chapters, tmp_path):
    """Its file named as a library book's would replace that book, and removing it would then take that
    book out of the library the run measures (it did until session 48)."""
    books = fullsize_books(real_chapters, 2, words=1500)
    extra = added_book(real_chapters, words=1500)
    names = {write_fullsize_book(b, tmp_path / "books").name for b in books}
    added = write_fullsize_book(extra, tmp_path / "added")
    assert added.name not in names
    assert extra.chapters != books[0].chapters
    lib = Library(tmp_path / "lib")
    with lib.writer():
        pass
    from folio.dataflows.api import ingest

    assert ingest([str(p) for p in sorted((tmp_path / "books").iterdir())], library=lib, cache=False).ok
    report = ingest([str(added)], library=lib, cache=False)
    assert report.ok and len(lib.descriptors()) == 3
    lib.remove(report.ingested[0].book_id)
    assert sorted(Path(b["source_file"]).name for b in lib.descriptors()) == sorted(names)
    lib.close()


def test_the_run_bar_counts_finished_books_words_and_stops_its_clock_while_paused(tmp_path):
    bar = WordsBar(1000)
    done = BooksDone(bar, {"a.txt": 100, "b.txt": 900})
    with bar.paused():
        time.sleep(0.2)
    done.book_finished(str(tmp_path / "a.txt"), 12)  # 10% of the words: the ETA is taken now
    bar.close()
    assert bar.done == 100 and bar.paused_s >= 0.2
    at, predicted = bar.eta_at_10pct
    assert at < 0.2 and predicted == pytest.approx(10 * at)  # the paused time is not ingest time


RUN = """
import sys
from pathlib import Path
from bench.fullsize_bench import real_ingest
workers = int(sys.argv[2])
print(real_ingest([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), {"workers": workers}))
"""


def books_in(library: Path) -> list[str]:
    """File names of the books committed to the library (read-only; none before its first commit)."""
    if not (library / "library.sqlite").exists():
        return []
    conn = apsw.Connection(str(library / "library.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        rows = conn.execute("SELECT json_extract(descriptor, '$.source_file') FROM books")
        return [Path(r[0]).name for r in rows]
    except apsw.SQLError:  # the schema is not there yet
        return []
    finally:
        conn.close()


@pytest.mark.model
@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "two-workers"])
def test_a_killed_ingest_run_again_ingests_each_book_once(real_chapters, tmp_path, workers):
    files = [write_fullsize_book(b, tmp_path / "books") for b in fullsize_books(real_chapters, 3, words=2500)]
    library = tmp_path / "library"
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    argv = [sys.executable, "-c", RUN, str(library), str(workers), *map(str, files)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not books_in(library) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # mid-run: one book in, the next being ingested
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    done = books_in(library)
    assert 1 <= len(done) < 3
    lib = Library(library)
    assert [f.name for f in pending_books(lib, files)] == [f.name for f in files if f.name not in done]
    lib.close()
    again = real_ingest(files, library)
    assert again["books"] == 3 - len(done)  # only the books the killed run had not committed
    after = books_in(library)
    assert sorted(after) == sorted(f.name for f in files)  # each book once
    lib = Library(library)
    try:
        assert lib.index.check() == [] and not list((library / "staging").iterdir())
    finally:
        lib.close()


def test_the_report_gives_the_2m_latency_against_the_ten_books_measured_beside_it() -> None:
    from bench.fullsize_report import fullsize_table

    summary = {"p50_ms": 1.0, "p95_ms": 2.0}
    warm = {
        name: summary for name in ("hybrid", "lexical", "query_encoding", "semantic_index", "lexical_index")
    }
    index = {
        "windows": 2_000_090,
        "books": 1291,
        "segments": 9,
        "first_hybrid_after_open_s": 0.7,
        "warm": warm,
        "open_files": 18,
        "rss_mb": 1200.0,
        "disk_mb": 9000.0,
        "add_one_book_s": 14.0,
        "remove_one_book_s": 0.5,
        "against_ten_books": {
            "library": {"p50_ms": 30.0, "p95_ms": 60.0},
            "ten_books": {"p50_ms": 10.0, "p95_ms": 12.0},
            "p50_ratio": 3.0,
        },
    }
    table = fullsize_table({"index": index, "add_to_empty_s": 12.0})
    row = next(line for line in table.splitlines() if "10 small books" in line)
    assert "9 vector segment(s)" in row and "30.0 / 60.0 ms; 10.0 / 12.0 ms; **3.0x**" in row
    assert "compacted" not in table  # no compaction measured, no row for it
