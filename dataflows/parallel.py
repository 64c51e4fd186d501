"""Library-scale ingest: the library DAG (``nodes.ingest.collection``) on an executor chosen by config.

``executor: local`` runs the books on a process pool sized by ``workers`` (default: one per 2 cores this
process may use and at least two, in-process below 1 MB of book files: ``backends.workers.default_workers``),
each worker limited to ``cores // workers`` torch threads; ``executor: dask`` runs
the same DAG on ``dask.distributed`` (``dask_scheduler``, or a ``LocalCluster`` of ``workers``
processes when it is null). A single book, or ``workers: 1``, runs in-process (no start-up cost).

Each book comes back to this process as it finishes; ``BookInstaller`` swaps it into the library
there (the caller holds the writer lock) and advances the progress bar, so a crash at any point
leaves every finished book installed and the rest untouched.

Caches: workers share the library's diskcache stores (process-safe) and Hamilton's SQLite metadata
store (one connection per process; SQLite serialises the small writes; see ``tests/test_parallel.py``).

Limitations: Hamilton's dynamic execution is experimental and polls its futures; the executors here
wait briefly on each poll so the driver process does not spin a core. A remote Dask cluster must
see the library directory on a shared filesystem.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import logging
import multiprocessing
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver
from hamilton.execution import executors
from hamilton.execution.grouping import NodeGroupPurpose
from hamilton.execution.state import TaskState
from hamilton.lifecycle import api as lifecycle

from folio.dataflows.caching import last_run, stores
from folio.dataflows.library import Library
from folio.dataflows.registry import build, driver_for, settings_inputs
from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.progress import BarProgress, Progress
from folio.nodes.backends.workers import available_cores, die_with_owner, pool_size, source_bytes
from folio.nodes.core.types import BookOutcome, FolioError, StagedBook, interrupted

POLL_SECONDS = 0.05
EXECUTORS = ("local", "dask")


# --- progress ------------------------------------------------------------------------------------
class BookProgress(Progress):
    """A tqdm bar over books (done/total, ETA) with the chunks done so far; thread-safe enough for one
    updater."""

    def __init__(self, total_books: int) -> None:
        from tqdm import tqdm

        self._chunks = 0
        self._bar = tqdm(total=total_books, desc="books", unit="book", file=sys.stderr, dynamic_ncols=True)

    @property
    def books_done(self) -> int:
        return int(self._bar.n)

    @property
    def chunks_done(self) -> int:
        return self._chunks

    def book_done(self, n_chunks: int) -> None:
        self._chunks += n_chunks
        self._bar.set_postfix_str(f"{self._chunks} chunks", refresh=False)
        self._bar.update(1)

    def book_finished(self, source_file: str, n_chunks: int) -> None:
        self.book_done(n_chunks)

    def close(self) -> None:
        self._bar.close()


# --- installing books as they come back -----------------------------------------------------------
class BookInstaller(lifecycle.TaskReturnHook):
    """Swaps each staged book into the library as its task returns (runs in the driver's process)."""

    def __init__(self, library: Library, progress: Progress | None = None) -> None:
        self.library = library
        self.progress = progress
        self.results: dict[str, StagedBook | FolioError] = {}
        self.cache_nodes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {}  # travels inside every task to the workers, where it never runs

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a worker's copy holds nothing (the type checker's None-free attributes are never read there)
        self.__dict__.update(library=None, progress=None, results={}, cache_nodes={})

    def install(self, outcome: BookOutcome) -> None:
        """Install one outcome (or record its error); an install failure fails that book alone."""
        result: StagedBook | FolioError
        self.cache_nodes[outcome.source_file] = (outcome.cache_executed, outcome.cache_from_cache)
        if outcome.staged is None:
            result = FolioError(outcome.error_source, outcome.error_reason)  # ``outcome.error``
        else:
            try:
                self.library.install(outcome.staged)
                result = outcome.staged
            except FolioError as exc:
                result = exc
            except Exception as exc:
                result = FolioError(outcome.source_file, f"install failed: {type(exc).__name__}: {exc}")
            finally:
                shutil.rmtree(outcome.staged.directory, ignore_errors=True)
        self.results[outcome.source_file] = result
        if self.progress is not None:
            self.progress.book_finished(
                outcome.source_file, result.n_chunks if isinstance(result, StagedBook) else 0
            )

    def run_after_task_return(
        self, *, result: Any, success: bool, purpose: NodeGroupPurpose, **kwargs: Any
    ) -> None:
        if not success or not isinstance(result, Mapping):
            return
        for value in result.values():
            if isinstance(value, BookOutcome) and value.source_file not in self.results:
                self.install(value)


# --- executors -----------------------------------------------------------------------------------
class _PoliteFuture(executors.TaskFuture):
    """A future whose state query waits up to ``POLL_SECONDS`` while it runs (Hamilton polls in a loop)."""

    def __init__(self, future: Any, wait: Callable[[Any], None]) -> None:
        self.future = future
        self._wait = wait

    def get_state(self) -> TaskState:
        if not self.future.done():
            self._wait(self.future)
            if not self.future.done():
                return TaskState.RUNNING
        return TaskState.FAILED if self.future.exception() is not None else TaskState.SUCCESSFUL

    def get_result(self) -> Any:
        return self.future.result() if self.future.done() else None


def _run_pickled(payload: bytes) -> dict[str, Any]:
    import cloudpickle

    return executors.base_execute_task(cloudpickle.loads(payload))


def _wait_local(future: concurrent.futures.Future) -> None:
    concurrent.futures.wait([future], timeout=POLL_SECONDS)


def _wait_dask(future: Any) -> None:
    with contextlib.suppress(Exception):  # a timeout: still running
        future.exception(timeout=POLL_SECONDS)


class BookProcessPool(executors.TaskExecutor):
    """A process pool of ``workers`` (forkserver: no inherited locks or open databases); tasks go by
    cloudpickle."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.active: list[concurrent.futures.Future] = []

    def init(self) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            [
                "folio.nodes.ingest.collection",
                "folio.dataflows.parallel",
                "folio.nodes.backends.bert",
                "torch",
            ]
        )
        self.pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=context, initializer=die_with_owner, initargs=(os.getpid(),)
        )
        self.active = []

    def finalize(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def submit_task(self, task: executors.TaskImplementation) -> executors.TaskFuture:
        import cloudpickle

        assert self.pool is not None, "executor not initialised"
        future = self.pool.submit(_run_pickled, cloudpickle.dumps(task))
        self.active.append(future)
        return _PoliteFuture(future, _wait_local)

    def can_submit_task(self) -> bool:
        self.active = [f for f in self.active if not f.done()]
        return len(self.active) < self.workers


class LibraryDaskExecutor(executors.TaskExecutor):
    """Hamilton's ``h_dask.DaskExecutor`` scheme (``client.submit(base_execute_task, task)``) on a client it
    opens and closes itself: ``scheduler``, or a process ``LocalCluster``; at most one task per Dask thread.

    Not a subclass: importing ``hamilton.plugins.h_dask`` imports ``dask.dataframe``, which needs pyarrow.
    """

    def __init__(self, scheduler: str | None, workers: int) -> None:
        self.scheduler = scheduler
        self.workers = workers
        self.client: Any = None
        self.cluster: Any = None
        self.active: list[Any] = []

    def init(self) -> None:
        from dask.distributed import Client, LocalCluster

        if self.scheduler:
            self.client = Client(self.scheduler)
        else:
            self.cluster = LocalCluster(
                n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            self.client = Client(self.cluster)
        self.active = []

    def finalize(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None

    def submit_task(self, task: executors.TaskImplementation) -> executors.TaskFuture:
        future = self.client.submit(executors.base_execute_task, task, pure=False)
        self.active.append(future)
        return _PoliteFuture(future, _wait_dask)

    def can_submit_task(self) -> bool:
        self.active = [f for f in self.active if not f.done()]
        capacity = sum(self.client.nthreads().values()) or 1
        return len(self.active) < capacity


def _remote_executor(
    config: Mapping[str, Any], n_books: int | None, book_bytes: int | None = None
) -> executors.TaskExecutor:
    """The executor for the per-book tasks named by ``executor``; in-process for one book, one worker or
    (by default) a small ingest (``backends.workers.pool_size``)."""
    kind = config.get("executor", "local")
    if kind not in EXECUTORS:
        raise FolioError("executor", f"unknown executor {kind!r}: use local or dask")
    workers = config.get("workers")
    size = pool_size(n_books if n_books is not None else 2**31, workers, available_cores(), book_bytes)
    if kind == "dask":
        if importlib.util.find_spec("distributed") is None:
            raise FolioError("executor", "dask is missing: pip install 'dask[distributed]'")
        if config.get("dask_scheduler") or size > 1:
            return LibraryDaskExecutor(config.get("dask_scheduler"), size)
    elif size > 1:
        return BookProcessPool(size)
    return executors.SynchronousLocalTaskExecutor()


def library_driver(
    config: Mapping[str, Any],
    n_books: int | None = None,
    installer: BookInstaller | None = None,
    book_bytes: int | None = None,
) -> driver.Driver:
    """The library-ingest DAG with its executor (``n_books`` and ``book_bytes`` size it; ``None``: as if
    many)."""
    adapters = (installer,) if installer is not None else ()
    executor = _remote_executor(config, n_books, book_bytes)
    return build("library", config, adapters=adapters, remote_executor=executor)


# --- one book -----------------------------------------------------------------------------------
def ingest_one_book(
    path: str,
    progress: Progress,
    *,
    library_path: str,
    cache_library: str,
    config: Mapping[str, Any],
    cache_enabled: bool,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> BookOutcome:
    """Run the per-book ingest DAG for ``path`` into a fresh staging directory of ``library_path``.

    ``cache_library`` is the library whose caches the run uses (the target library, or an experiment's
    main one); ``metadata`` (path -> fields, from a Calibre library) and the file's stamp (size, mtime,
    sha256: what ``folio sync`` compares) go into the book's descriptor. A failure removes the staging
    directory and raises (the library DAG turns it into the book's one-line error). Runs in a worker
    process: it is handed to the DAG as ``book_ingester``.
    """
    if not os.environ.get("FOLIO_DEBUG"):  # a failure comes back as one line, not Hamilton's traceback log
        logging.getLogger("hamilton").setLevel(logging.CRITICAL)
    hint = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in Path(path).stem)  # any bytes
    staging = Library(library_path).new_staging_dir(hint)
    reuse_windows = cache_enabled  # without the cache every window is encoded afresh, too
    if not _is_utf8(path):  # Hamilton's cache fingerprints its inputs as UTF-8: this book runs uncached
        cache_enabled = False
    try:
        cache_lib = Library(cache_library)
        dr = driver_for("ingest", config, cache_lib.path if cache_enabled else None)
        window_cache = EmbeddingCache(cache_lib.cache_dir / "embeddings" if reuse_windows else None)
        try:
            inputs = {
                "source_path": path,
                "staging_dir": str(staging),
                "embedding_cache": window_cache,
                "progress": progress,
                "model_cache_dir": str(cache_lib.model_cache_dir),
                "source_metadata": source_metadata_json(
                    path, (metadata or {}).get(path), config.get("max_book_bytes")
                ),
            }
            result = dr.execute(["staged_book"], inputs={**settings_inputs(dr, config), **inputs})
        finally:
            window_cache.close()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    used = last_run(dr) if cache_enabled else {"executed": [], "from_cache": []}
    return BookOutcome(
        path,
        staged=result["staged_book"],
        cache_executed=tuple(used["executed"]),
        cache_from_cache=tuple(used["from_cache"]),
    )


def source_metadata_json(path: str, metadata: Mapping[str, Any] | None, max_bytes: int | None = None) -> str:
    """The ``source_metadata`` input of the ingest DAG: ``metadata`` and the file's stamp, as JSON."""
    import json

    from folio.dataflows.calibre import file_stamp

    try:
        stamp = file_stamp(Path(path), max_bytes)
    except OSError:
        stamp = {}  # the reader names the problem
    return json.dumps({**(metadata or {}), **stamp}, ensure_ascii=False, sort_keys=True)


def _is_utf8(path: str) -> bool:
    """False for a file name with non-UTF-8 bytes (surrogate escapes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shared_metadata_store(library_path: str | Path) -> None:
    """Put the library's Hamilton metadata DB in WAL mode (persistent) so local processes write it at once.

    Measured (``tests/test_parallel.py``): two processes committing 400 entries each failed with
    "database is locked" in 2 of 5 runs in the default rollback-journal mode, 0 of 3 in WAL (and faster).
    WAL needs every writer on one host, so a remote Dask cluster keeps the default mode.
    """
    metadata, results = stores(library_path)
    try:
        metadata.connection.execute("PRAGMA journal_mode=WAL")
    finally:
        results.close()
        del metadata


def ingest_books(
    files: Sequence[Path],
    library: Library,
    config: Mapping[str, Any],
    progress: Progress,
    cache: bool = True,
    cache_library: Library | None = None,
    cache_report: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[StagedBook | FolioError]:
    """Ingest ``files`` in parallel (caller holds ``library.writer()``); one result per file, in order.

    ``cache_library`` (default: ``library``) owns the node and embedding caches the books use;
    ``cache_report``, when given, receives ``source file -> (nodes executed, nodes from the cache)``;
    ``metadata``: ``str(file) -> fields`` kept in a book's descriptor (a Calibre library's).
    """
    cache_owner = cache_library or library
    sources = tuple(str(f) for f in files)
    if not sources:
        return []
    book_bytes = source_bytes(sources)
    in_process = isinstance(
        _remote_executor(config, len(sources), book_bytes), executors.SynchronousLocalTaskExecutor
    )
    bar: Progress = (
        BookProgress(len(sources)) if isinstance(progress, BarProgress) and not in_process else progress
    )
    if cache and not config.get("dask_scheduler"):
        shared_metadata_store(cache_owner.path)
    installer = BookInstaller(library, bar)
    dr = library_driver(config, len(sources), installer, book_bytes)
    book_ingester = functools.partial(
        ingest_one_book,
        library_path=str(library.path),
        cache_library=str(cache_owner.path),
        config=dict(config),
        cache_enabled=cache,
        metadata={k: dict(v) for k, v in (metadata or {}).items()},
    )
    inputs = {
        "source_files": sources,
        "book_ingester": book_ingester,
        "progress": progress if in_process else Progress(),
    }
    try:
        dr.execute(["book_outcomes"], inputs={**settings_inputs(dr, config), **inputs})
    except Exception as exc:  # a worker died: finished books stay installed, the rest fail with the reason
        if interrupted(exc):
            raise KeyboardInterrupt from exc
        reason = (
            f"ingest aborted: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        )
        for path in sources:
            installer.results.setdefault(path, FolioError(path, reason))
    finally:
        if bar is not progress:
            bar.close()
    if cache_report is not None:
        cache_report.update(installer.cache_nodes)
    return [installer.results[path] for path in sources]
