"""Hardening of the command line (issue 13: 1, 2, 7): every fault is one line on stderr with a non-zero
exit, a damaged book never takes the library down, ``folio doctor`` repairs what it can, and nothing is
written outside the library. Libraries are generated (no model), damage is made here, and the CLI runs
in subprocesses where exit codes and stderr matter."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from folio.dataflows.library import Library
from folio.nodes.core.types import FolioError
from tests.conftest import REPO_DIR
from tests.test_library_index import build_library, synthetic_book

WORDS = ["whale", "ship", "captain", "harpoon", "sailor", "island", "storm", "rope", "deck", "mast", "ocean"]


def folio(*args: str | bytes, env: dict[str, str] | None = None, home: Path | None = None):
    """``folio ARGS`` in a fresh interpreter; ``home``: HOME (and nothing else of the user's) there."""
    environ = {**os.environ, "PYTHONPATH": str(REPO_DIR), **(env or {})}
    if home is not None:
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "MPLCONFIGDIR", "HF_HOME"):
            environ.pop(name, None)
        environ["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", *args],
        capture_output=True,
        env=environ,
        timeout=300,
    )


def one_line(out: subprocess.CompletedProcess) -> str:
    """The process's stderr, asserted to be exactly one line without a traceback."""
    err = out.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.strip()


def chapters(seed: int) -> list[list[str]]:
    return [
        [" ".join(WORDS[(seed + i * j) % len(WORDS)] for j in range(40)) + f" part {i}" for i in range(3)]
        for _ in range(2)
    ]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A generated three-book library (hashed vectors, concept maps), closed."""
    path = tmp_path / "library"
    books = [synthetic_book(title, chapters(i)) for i, title in enumerate(("Alpha", "Beta", "Gamma"))]
    books = [
        type(b)(b.descriptor, b.chapters, b.chunks, b.windows, b.vectors, concept_map(b.book_id))
        for b in books
    ]
    build_library(path, books).close()
    return path


def concept_map(book_id: str) -> bytes:
    from folio.nodes.core.types import ConceptMap

    return ConceptMap(book_id=book_id, entities=(), themes=(), events=(), version=1).to_json()


def book_ids(path: Path) -> list[str]:
    con = sqlite3.connect(path / "library.sqlite")
    try:
        return sorted(r[0] for r in con.execute("SELECT book_id FROM books"))
    finally:
        con.close()


def damage_row(path: Path, sql: str, params: tuple = ()) -> None:
    con = sqlite3.connect(path / "library.sqlite")
    try:
        con.execute(sql, params)
        con.commit()
    finally:
        con.close()


# --- settings and arguments ------------------------------------------------------------------------------
def test_an_unknown_switch_value_from_the_environment_is_one_line_naming_it(library):
    out = folio("search", "whale", "--library", str(library), env={"FOLIO_SEARCH_MODE": "bogus"})
    assert out.returncode == 1
    line = one_line(out)
    assert line.startswith("folio: FOLIO_SEARCH_MODE: search_mode must be one of lexical, semantic, hybrid")


def test_an_unprefixed_variable_is_ignored(library):
    out = folio(
        "search", "whale", "--mode", "lexical", "--library", str(library), env={"SEARCH_MODE": "bogus"}
    )
    assert out.returncode == 0, out.stderr
    assert b"whale" in out.stdout


@pytest.mark.parametrize("k", ["99999999999999999999999", "0", "ten"])
def test_a_bad_k_is_one_line_and_exit_2(library, k):
    out = folio("search", "whale", "--library", str(library), "-k", k)
    assert out.returncode == 2
    assert one_line(out).startswith("folio: search: argument -k: ")


def test_thirty_three_thousand_chapters_are_one_line(library):
    many = [a for i in range(33_000) for a in ("--chapter", f"ch-{i}")]
    out = folio("search", "whale", "--mode", "lexical", "--library", str(library), *many)
    assert out.returncode == 1
    assert one_line(out) == "folio: --chapter: at most 10,000 chapters (got 33,000)"


def test_a_chapter_repeated_many_times_counts_once(library):
    chapter = json.loads(
        folio("search", "whale", "--mode", "lexical", "--json", "--library", str(library)).stdout
    )[0]["chapter_id"]
    out = folio(
        "search",
        "whale",
        "--mode",
        "lexical",
        "--json",
        "--library",
        str(library),
        *["--chapter", chapter] * 33_000,
    )
    assert out.returncode == 0, out.stderr
    assert {h["chapter_id"] for h in json.loads(out.stdout)} == {chapter}


def test_a_query_that_is_not_utf8_is_one_line(library):
    out = folio("search", b"\xff\xfe whale", "--library", str(library))
    assert out.returncode == 1
    assert one_line(out) == "folio: query: not valid UTF-8 text"


def test_a_library_that_is_a_file_is_one_line_for_reads_and_writes(tmp_path):
    not_a_dir = tmp_path / "library.txt"
    not_a_dir.write_text("hello")
    book = tmp_path / "book.txt"
    book.write_text("A BOOK\n\nSome words about a whale.\n")
    for args in (("books",), ("search", "whale"), ("ingest", str(book)), ("doctor",), ("cache", "info")):
        out = folio(*args, "--library", str(not_a_dir))
        assert out.returncode == 1, args
        assert (
            one_line(out) == f"folio: {not_a_dir}: not a directory: a library is a directory (--library DIR)"
        )
    assert not_a_dir.read_text() == "hello"


def test_a_library_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """(The tests run as root, for whom permissions do not hold: the refusal is simulated.)"""
    lib = Library(tmp_path / "library")

    def refused(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(FolioError) as error, lib.writer():
        pass
    assert (
        str(error.value)
        == f"{lib.path}: cannot write to the library (Permission denied); nothing was changed"
    )


def test_cache_info_reads_without_writing(library):
    assert folio("cache", "clear", "--library", str(library)).returncode == 0
    from folio.nodes.backends.embedding_cache import EmbeddingCache

    cache = EmbeddingCache(library / "cache" / "embeddings")
    cache.close()
    before = {p: p.read_bytes() for p in (library / "cache").rglob("*") if p.is_file()}
    out = folio("cache", "info", "--json", "--library", str(library))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["window_embeddings"] == 0
    assert {p: p.read_bytes() for p in before} == before  # (SQLite may add its shared-memory index)


# --- the last resort, Ctrl-C, a closed pipe ---------------------------------------------------------------
FAULTY = (
    "import sys, folio.dataflows.cli as cli\n"
    "def boom(args):\n    raise {error}\n"
    "cli.cmd_books = boom\n"
    "sys.exit(cli.main(['books']))\n"
)


def run_code(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO_DIR), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=environ, timeout=300)


def test_an_unexpected_exception_is_one_line_with_the_debug_hint():
    out = run_code(FAULTY.format(error="KeyError('gone\\nwith a second line')"))
    assert out.returncode == 1
    assert (
        one_line(out)
        == "folio: internal error: KeyError: 'gone\\nwith a second line' (FOLIO_DEBUG=1 shows the traceback)"
    )


def test_folio_debug_shows_the_traceback():
    out = run_code(FAULTY.format(error="ZeroDivisionError('boom')"), env={"FOLIO_DEBUG": "1"})
    assert out.returncode == 1
    err = out.stderr.decode()
    assert (
        "Traceback" in err
        and err.strip().splitlines()[-1] == "folio: internal error: ZeroDivisionError: boom"
    )


def test_ctrl_c_is_interrupted_and_exit_130():
    out = run_code(FAULTY.format(error="KeyboardInterrupt()"))
    assert out.returncode == 130
    assert one_line(out) == "folio: interrupted"


def test_output_into_a_closed_pipe_ends_quietly(library):
    environ = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    read, write = os.pipe()
    os.close(read)  # the reader (`head`) has gone before folio writes
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "folio.dataflows.cli", "books", "--json", "--library", str(library)],
            stdout=write,
            stderr=subprocess.PIPE,
            env=environ,
            timeout=300,
        )
    finally:
        os.close(write)
    assert proc.returncode == 141
    assert proc.stderr == b""


# --- a damaged library -------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "malformed"])
def test_a_damaged_library_database_is_one_line_naming_it_and_doctor_says_what_to_do(library, damage):
    database = library / "library.sqlite"
    if damage == "garbage":
        database.write_bytes(os.urandom(64 * 1024))
    else:
        with open(database, "r+b") as f:
            f.seek(4096)
            f.write(os.urandom(4096 * 4))
    for args in (("books",), ("search", "whale", "--mode", "lexical"), ("remove", "alpha")):
        out = folio(*args, "--library", str(library))
        assert out.returncode == 1, args
        line = one_line(out)
        assert line.startswith(f"folio: {database}: damaged library database (") and "folio doctor" in line
    out = folio("doctor", "--library", str(library))
    assert out.returncode == 1
    assert f"damaged   {database}: damaged (" in out.stdout.decode()
    assert "`folio ingest` the books again" in out.stdout.decode()


def test_a_damaged_descriptor_fails_that_book_alone_and_doctor_names_it(library):
    ids = book_ids(library)
    damaged, others = ids[0], ids[1:]
    damage_row(library, "UPDATE books SET descriptor = '{not json' WHERE book_id = ?", (damaged,))
    out = folio("books", "--json", "--library", str(library))
    assert out.returncode == 0
    assert sorted(b["book_id"] for b in json.loads(out.stdout)) == others
    line = one_line(out)
    assert (
        line.startswith(f"folio: {damaged}: its descriptor is not JSON") and f"folio remove {damaged}" in line
    )
    out = folio("search", "whale", "--mode", "lexical", "--json", "--library", str(library))
    assert out.returncode == 0 and {h["book_id"] for h in json.loads(out.stdout)} <= set(others)
    out = folio("ask", "What is the whale?", "--json", "--library", str(library))
    assert out.returncode == 0 and {c["book_id"] for c in json.loads(out.stdout)["citations"]} <= set(others)
    assert one_line(out).startswith(f"folio: {damaged}: its descriptor is not JSON")
    doctor = folio("doctor", "--library", str(library))
    assert doctor.returncode == 1
    assert f"damaged   {damaged}: its descriptor is not JSON" in doctor.stdout.decode()
    assert folio("remove", damaged, "--library", str(library)).returncode == 0
    doctor = folio("doctor", "--library", str(library))
    assert doctor.returncode == 0, doctor.stdout
    assert book_ids(library) == others


def test_doctor_names_a_book_whose_rows_do_not_match_its_descriptor_and_a_damaged_concept_map(library):
    ids = book_ids(library)
    damage_row(library, "DELETE FROM windows WHERE book_id = ?", (ids[0],))
    damage_row(library, "UPDATE books SET concept_map = X'7b7b' WHERE book_id = ?", (ids[1],))
    out = folio("doctor", "--library", str(library))
    text = out.stdout.decode()
    assert out.returncode == 1, text
    assert f"damaged   {ids[0]}: 0 windows stored, its descriptor says 6" in text
    assert (
        f"damaged   {ids[1]}: damaged concept map" in text
        and f"`folio ingest /books/{ids[1]}.txt` again" in text
    )
    assert ids[2] not in text
    assert text.strip().splitlines()[-1] == "2 problem(s) remain: see the fixes above"


def test_doctor_rebuilds_a_garbage_vector_index_then_finds_the_library_healthy(library):
    vectors = next(library.glob("vectors-*.usearch"))
    vectors.write_bytes(os.urandom(10_000))
    out = folio("doctor", "--library", str(library))
    assert out.returncode == 0, out.stdout
    assert (
        f"repaired  {vectors}: missing or damaged vector index — rebuilt from the stored vectors"
        in out.stdout.decode()
    )
    assert folio("doctor", "--library", str(library)).stdout.decode().strip().endswith("healthy")
    lib = Library(library)
    try:
        assert lib.index.check() == []
    finally:
        lib.close()


def test_doctor_rebuilds_a_damaged_lexical_index(library):
    damage_row(
        library, "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', 1, 'not its text')"
    )
    lib = Library(library)
    try:
        assert lib.index.lexical_problem() is not None
    finally:
        lib.close()
    out = folio("doctor", "--library", str(library))
    assert out.returncode == 0, out.stdout
    assert "lexical index:" in out.stdout.decode() and "— rebuilt" in out.stdout.decode()
    lib = Library(library)
    try:
        assert lib.index.check() == []
    finally:
        lib.close()


def test_damaged_caches_and_catalog_are_one_line_then_cleared_by_doctor(library):
    from folio.nodes.backends.embedding_cache import EmbeddingCache

    EmbeddingCache(library / "cache" / "embeddings").close()
    embeddings = library / "cache" / "embeddings"
    (embeddings / "cache.db").write_bytes(os.urandom(8192))
    (library / "catalog.duckdb").write_bytes(os.urandom(8192))
    out = folio("cache", "info", "--library", str(library))
    assert out.returncode == 1
    assert one_line(out).startswith(f"folio: {embeddings}: damaged embedding cache (")
    out = folio("doctor", "--library", str(library))
    text = out.stdout.decode()
    assert out.returncode == 0, text
    assert f"repaired  {embeddings}: damaged embedding cache" in text and "— cleared" in text
    assert f"repaired  {library / 'catalog.duckdb'}: damaged" in text
    assert folio("cache", "info", "--library", str(library)).returncode == 0


def test_doctor_removes_rows_of_a_book_the_library_does_not_list(library):
    ids = book_ids(library)
    damage_row(library, "DELETE FROM books WHERE book_id = ?", (ids[0],))
    out = folio("doctor", "--library", str(library))
    assert out.returncode == 0, out.stdout
    assert f"repaired  {ids[0]}: rows of a book the library does not list — removed" in out.stdout.decode()
    con = sqlite3.connect(library / "library.sqlite")
    try:
        assert con.execute("SELECT count(*) FROM chunks WHERE book_id = ?", (ids[0],)).fetchone()[0] == 0
    finally:
        con.close()


def test_the_service_reports_a_damaged_library_as_one_line(library):
    from folio.dataflows.service import Service

    (library / "library.sqlite").write_bytes(os.urandom(64 * 1024))
    service = Service(library, config={"kiwix": "none"})
    try:
        with pytest.raises(FolioError) as error:
            service.books()
        assert "\n" not in str(error.value) and str(error.value).startswith(
            f"{library / 'library.sqlite'}: damaged"
        )
    finally:
        service.close()


# --- nothing written outside the library --------------------------------------------------------------
def test_commands_write_nothing_under_home(library, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    for args in (("books",), ("search", "whale", "--mode", "lexical"), ("doctor",), ("cache", "info")):
        out = folio(*args, "--library", str(library), home=home)
        assert out.returncode == 0, (args, out.stderr)
    assert sorted(home.rglob("*")) == []


# --- an interrupted ingest --------------------------------------------------------------------------------
def test_ctrl_c_during_an_ingest_leaves_the_library_as_it_was(alice_copy, data_dir):
    from tests.fault_corpus import _default_sigint
    from tests.test_library import _snapshot

    before = _snapshot(alice_copy)
    book = data_dir / "books" / "txt" / "pg35_wells_the-time-machine.txt"
    environ = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    command = ["ingest", str(book), "--quiet", "--library", str(alice_copy)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "folio.dataflows.cli", *command],
        stderr=subprocess.PIPE,
        env=environ,
        preexec_fn=_default_sigint,  # a test run started in the background ignores SIGINT: not the command
    )
    deadline = time.monotonic() + 240
    staged = None
    while time.monotonic() < deadline and proc.poll() is None and staged is None:
        staged = next((alice_copy / "staging").glob("*/book.sqlite"), None)  # mid-indexing
        time.sleep(0.05)
    assert staged is not None, "the ingest never reached the indexing stage"
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "folio: interrupted" and b"Traceback" not in err
    assert not any((alice_copy / "staging").iterdir())  # nothing half-written is left behind
    assert _snapshot(alice_copy) == before


def test_an_interrupt_is_found_behind_the_error_a_clean_up_hook_raised():
    from folio.nodes.core.types import interrupted

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AssertionError  # noqa: B904 - what Hamilton's cache adapter raises on its way out
    except AssertionError as exc:
        assert interrupted(exc)
    assert not interrupted(ValueError("plain"))
    assert interrupted(KeyboardInterrupt())
