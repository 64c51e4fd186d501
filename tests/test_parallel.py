"""Library-scale ingest: books in parallel on a process pool or Dask; a bad book fails alone."""

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from hamilton.execution.executors import SynchronousLocalTaskExecutor

from folio.dataflows.api import ingest
from folio.dataflows.caching import stores
from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.dataflows.parallel import (
    BookInstaller,
    BookProcessPool,
    BookProgress,
    LibraryDaskExecutor,
    _remote_executor,
    library_driver,
    shared_metadata_store,
)
from folio.nodes.backends.progress import Progress
from folio.nodes.backends.workers import MIN_POOL_BYTES, pool_size, source_bytes, threads_per_worker
from folio.nodes.core.types import BookOutcome, FolioError, StagedBook
from folio.nodes.ingest.collection import _in_input_order
from tests.conftest import ALICE_EPUB, BOOKS, REPO_DIR

ALICE_TXT = BOOKS / "txt/pg11_carroll_alices-adventures-in-wonderland.txt"


def _bad_book(tmp_path):
    """A zip archive named .epub with no EPUB container: the parser rejects it."""
    bad = tmp_path / "broken.epub"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("chapter.txt", "Down the rabbit hole.")
    return bad


def _assert_two_alices_and_one_error(report, library, bad):
    assert sorted(s.n_chunks for s in report.ingested) == sorted(
        b["chunks"] for b in Library(library).books()
    )
    assert {b["source_file"] for b in Library(library).books()} == {
        str(ALICE_EPUB.resolve()),
        str(ALICE_TXT.resolve()),
    }
    assert all(s.n_chunks > 0 for s in report.ingested)
    assert len(report.errors) == 1
    error = report.errors[0]
    assert error.source == str(bad) and "\n" not in str(error)
    assert not any((library / "staging").iterdir())  # nothing half-written is left behind


# --- sizing -------------------------------------------------------------------------------------
def test_pool_never_has_more_workers_than_books():
    assert pool_size(n_books=1, workers=None, cores=8) == 1
    assert pool_size(n_books=10, workers=None, cores=2) == 2  # two 1-thread encoders beat one of 2 threads
    assert pool_size(n_books=10, workers=None, cores=1) == 1
    assert pool_size(n_books=10, workers=None, cores=16) == 8
    assert pool_size(n_books=10, workers=3, cores=2) == 3


def test_a_small_ingest_stays_in_process_unless_workers_are_asked_for(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("word " * 1000, encoding="utf-8")
    size = source_bytes([small, tmp_path / "missing.txt"])
    assert size == small.stat().st_size
    assert pool_size(n_books=3, workers=None, cores=2, book_bytes=size) == 1
    assert pool_size(n_books=3, workers=None, cores=2, book_bytes=MIN_POOL_BYTES) == 2
    assert pool_size(n_books=3, workers=2, cores=2, book_bytes=size) == 2  # asked for: a pool
    local = load_config(environ={})
    assert isinstance(_remote_executor(local, 3, size), SynchronousLocalTaskExecutor)
    assert isinstance(_remote_executor(local, 3, MIN_POOL_BYTES), BookProcessPool)


def test_zero_workers_is_a_one_line_config_error():
    with pytest.raises(FolioError, match="workers must be at least 1"):
        pool_size(n_books=3, workers=0, cores=2)


def test_pool_workers_share_out_the_cores_and_in_process_keeps_torch_default():
    assert threads_per_worker(pool_size=2, cores=2) == 1
    assert threads_per_worker(pool_size=2, cores=16) == 8
    assert threads_per_worker(pool_size=1, cores=16) == 0


def test_one_book_or_one_worker_runs_in_process():
    local = load_config(environ={})
    assert isinstance(_remote_executor(local, n_books=1), SynchronousLocalTaskExecutor)
    assert isinstance(_remote_executor({**local, "workers": 1}, n_books=5), SynchronousLocalTaskExecutor)
    assert isinstance(_remote_executor({**local, "workers": 2}, n_books=5), BookProcessPool)


def test_executor_key_selects_the_dask_executor_and_rejects_unknown_names():
    config = load_config(overrides={"executor": "dask", "workers": 2}, environ={})
    assert isinstance(_remote_executor(config, n_books=3), LibraryDaskExecutor)
    with pytest.raises(FolioError, match="unknown executor 'ray'"):
        _remote_executor({**config, "executor": "ray"}, n_books=3)


def test_library_dag_has_one_worker_threads_variant_per_executor():
    for executor in ("local", "dask"):
        dr = library_driver(load_config(overrides={"executor": executor}, environ={}))
        nodes = {v.name: v for v in dr.list_available_variables()}
        assert {"book_file", "book_outcome", "book_outcomes", "worker_threads"} <= set(nodes)
        worker_threads = nodes["worker_threads"]
        deps = worker_threads.required_dependencies | worker_threads.optional_dependencies
        assert ("dask_scheduler" in deps) == (executor == "dask")


def test_outcomes_come_back_in_the_order_the_files_were_given():
    done = [BookOutcome("c"), BookOutcome("a"), BookOutcome("b")]
    assert [o.source_file for o in _in_input_order(done, ("a", "b", "c"))] == ["a", "b", "c"]


# --- installing and progress --------------------------------------------------------------------
def test_installer_records_a_failed_book_and_an_incomplete_staged_book_as_errors(tmp_path):
    lib = Library(tmp_path / "lib")
    progress = BookProgress(total_books=2)
    installer = BookInstaller(lib, progress)
    staged_dir = tmp_path / "staged"
    staged_dir.mkdir()
    with lib.writer():
        installer.install(BookOutcome("bad.epub", error_source="bad.epub", error_reason="not an EPUB"))
        installer.install(BookOutcome("x.txt", staged=StagedBook("x", str(staged_dir), "X", 1, 4, 9)))
    progress.close()
    assert str(installer.results["bad.epub"]) == "bad.epub: not an EPUB"
    assert "incomplete" in installer.results["x.txt"].reason
    assert not staged_dir.exists()
    assert (progress.books_done, progress.chunks_done) == (2, 0)


def test_book_progress_counts_books_and_chunks():
    progress = BookProgress(total_books=3)
    progress.book_done(21)
    progress.book_done(57)
    progress.close()
    assert (progress.books_done, progress.chunks_done) == (2, 78)


def test_any_progress_hears_which_book_finished(tmp_path):
    class Finished(Progress):
        def __init__(self) -> None:
            self.books: list[tuple[str, int]] = []

        def book_finished(self, source_file: str, n_chunks: int) -> None:
            self.books.append((source_file, n_chunks))

    lib, progress = Library(tmp_path / "lib"), Finished()
    with lib.writer():
        BookInstaller(lib, progress).install(
            BookOutcome("bad.epub", error_source="bad.epub", error_reason="x")
        )
    assert progress.books == [("bad.epub", 0)]


def test_installer_pickles_without_its_library_or_bar(tmp_path):
    import cloudpickle

    installer = BookInstaller(Library(tmp_path), BookProgress(total_books=1))
    clone = cloudpickle.loads(cloudpickle.dumps(installer))
    assert clone.library is None and clone.results == {}


# --- the SQLite metadata store under concurrent writers -----------------------------------------
def _hammer_metadata_store(library: str, worker: int, n: int) -> None:
    metadata, _ = stores(library)
    metadata.initialize(f"run-{worker}")
    for i in range(n):
        metadata.set(
            cache_key=f"k-{worker}-{i}",
            data_version=f"v{i}",
            run_id=f"run-{worker}",
            node_name="n",
            code_version="c",
        )


def test_two_processes_write_the_hamilton_metadata_store_at_once(tmp_path):
    shared_metadata_store(tmp_path)  # as the driver process does before it starts workers
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer_metadata_store, args=(str(tmp_path), w, 400)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(stores(tmp_path)[0]) == 800


# --- real books on real executors ---------------------------------------------------------------
def test_process_pool_ingests_a_folder_of_books_and_a_bad_book_fails_alone(tmp_path, data_dir):
    bad = _bad_book(tmp_path)
    library = tmp_path / "library"
    report = ingest([ALICE_EPUB, bad, ALICE_TXT], library=library, config={"executor": "local", "workers": 2})
    _assert_two_alices_and_one_error(report, library, bad)
    ids = {b["source_file"]: b["book_id"] for b in Library(library).books()}
    assert [s.book_id for s in report.ingested] == [
        ids[str(ALICE_EPUB.resolve())],
        ids[str(ALICE_TXT.resolve())],
    ]  # input order
    metadata = stores(library)[0]  # both workers wrote node-cache entries
    nodes = {row[0] for row in metadata.connection.execute("SELECT DISTINCT node_name FROM cache_metadata")}
    assert {"chunks", "window_vectors", "concept_map"} <= nodes


def test_dask_local_cluster_ingests_the_same_books_and_a_bad_book_fails_alone(tmp_path, data_dir):
    bad = _bad_book(tmp_path)
    library = tmp_path / "library"
    report = ingest([ALICE_EPUB, bad, ALICE_TXT], library=library, config={"executor": "dask", "workers": 2})
    _assert_two_alices_and_one_error(report, library, bad)


POOL_OWNER = """
import time
from folio.dataflows.parallel import BookProcessPool
pool = BookProcessPool(2)
pool.init()
busy = [pool.pool.submit(time.sleep, 600) for _ in range(2)]
time.sleep(1)
print(" ".join(map(str, pool.pool._processes)), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in status  # a zombie has died; nothing may reap it in a container


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_pool_workers_die_with_a_killed_owner_instead_of_finishing_their_books():
    """A worker of a killed ingest must not go on writing into staging/ while the next run recovers it."""
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    owner = subprocess.Popen([sys.executable, "-c", POOL_OWNER], env=env, stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in owner.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        owner.kill()
        owner.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers)  # the sleeping tasks had 600 s left
    finally:
        owner.kill()
        for pid in workers if "workers" in locals() else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "call", ["die_with_owner({pid})", "_exit_when_gone({pid}, None)"], ids=["pidfd", "polling"]
)
def test_a_worker_exits_at_once_when_its_owner_is_already_gone(call):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    code = "from folio.nodes.backends.workers import die_with_owner, _exit_when_gone\n"
    code += call.format(pid=dead.pid) + "\nimport time; time.sleep(2); print('ran on')"
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 1 and "ran on" not in child.stdout
