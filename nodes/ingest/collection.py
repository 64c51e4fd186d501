"""Library-level ingest DAG: every book file runs the per-book ingest DAG in parallel.

``book_file`` (``Parallelizable`` over ``source_files``) → ``book_outcome`` (one book: the
``book_ingester`` input, handed in by ``dataflows.parallel``, runs the per-book ingest DAG into a fresh
staging directory; any failure becomes that book's one-line error) → ``book_outcomes`` (``Collect``,
in input order). Where each
``book_outcome`` runs is the executor's business (``dataflows.parallel``): in-process, a local process
pool or a Dask cluster. The swap into the library happens in the driver's process as each book comes
back (``dataflows.parallel.BookInstaller``), never here.

Config keys: ``executor`` (variant key: ``local`` | ``dask``) selects ``worker_threads``; ``workers``
(pool size, null = one per 2 cores and at least 2, in-process for under 1 MB of books:
``backends.workers.default_workers``) and ``dask_scheduler``
size it. Inputs: ``source_files``,
``book_ingester`` (a picklable callable ``(book file, progress) -> BookOutcome`` that carries the
library, the ingest config and the cache library; this module never imports ``dataflows``) and
``progress``.

Limitations: workers write into ``LIBRARY/staging`` and the library's caches, so a remote Dask
cluster must see the library on a shared filesystem; a worker process that dies (segfault, OOM kill)
aborts the books still in flight, though the library stays consistent.
"""

from __future__ import annotations

from collections.abc import Callable

from hamilton.function_modifiers import config
from hamilton.htypes import Collect, Parallelizable

from folio.nodes.backends.progress import Progress
from folio.nodes.backends.workers import (
    available_cores,
    limit_torch_threads,
    pool_size,
    source_bytes,
    threads_per_worker,
)
from folio.nodes.core.types import BookOutcome, FolioError, interrupted


def _failure(path: str, exc: BaseException) -> BookOutcome:
    if isinstance(exc, FolioError):
        return BookOutcome(path, error_source=exc.source, error_reason=exc.reason)
    return BookOutcome(path, error_source=path, error_reason=f"ingest failed: {type(exc).__name__}: {exc}")


def _in_input_order(outcomes: list[BookOutcome], source_files: tuple[str, ...]) -> tuple[BookOutcome, ...]:
    rank = {path: i for i, path in reversed(list(enumerate(source_files)))}
    return tuple(sorted(outcomes, key=lambda o: rank.get(o.source_file, len(source_files))))


def _pool(source_files: tuple, workers: int | None) -> int:
    """The pool size ``dataflows.parallel`` gives these books (the same rule, the same inputs)."""
    return pool_size(len(source_files), workers, available_cores(), source_bytes(source_files))


@config.when(executor="local")
def worker_threads__local(source_files: tuple, workers: int | None = None) -> int:
    """Torch threads per pool process: the cores divided among the processes (0 = in-process)."""
    return threads_per_worker(_pool(source_files, workers), available_cores())


@config.when(executor="dask")
def worker_threads__dask(
    source_files: tuple, workers: int | None = None, dask_scheduler: str | None = None
) -> int:
    """Torch threads per Dask worker: a LocalCluster shares out the cores; a remote cluster keeps its own."""
    if dask_scheduler:
        return 0
    return threads_per_worker(_pool(source_files, workers), available_cores())


def book_file(source_files: tuple) -> Parallelizable[str]:
    """Each book file of the ingest, one parallel branch per file."""
    yield from source_files


def book_outcome(
    book_file: str,
    book_ingester: Callable,
    progress: Progress,
    worker_threads: int,
) -> BookOutcome:
    """One book staged by ``book_ingester(book_file, progress)`` (the per-book ingest DAG), or its error.

    Never raises but for Ctrl-C: any failure becomes the book's one-line error.
    """
    limit_torch_threads(worker_threads)
    try:
        return book_ingester(book_file, progress)
    except Exception as exc:  # one bad book never stops the others; Ctrl-C stops them all
        if interrupted(exc):
            raise KeyboardInterrupt from exc
        return _failure(book_file, exc)


def book_outcomes(book_outcome: Collect[BookOutcome], source_files: tuple) -> tuple[BookOutcome, ...]:
    """Every book's outcome, in the order the files were given."""
    return _in_input_order(list(book_outcome), source_files)
