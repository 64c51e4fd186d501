"""Library-level ingest DAG: every book file runs the per-book ingest DAG in parallel.

``book_file`` (``Parallelizable`` over ``source_files``) → ``book_outcome`` (one book: the per-book
ingest driver of ``dataflows.drivers`` writes it into a fresh staging directory; any failure becomes
that book's one-line error) → ``book_outcomes`` (``Collect``, in input order). Where each
``book_outcome`` runs is the executor's business (``dataflows.parallel``): in-process, a local process
pool or a Dask cluster. The swap into the library happens in the driver's process as each book comes
back (``dataflows.parallel.BookInstaller``), never here.

Config keys: ``executor`` (variant key: ``local`` | ``dask``) selects ``worker_threads``; ``workers``
(pool size, null = the cores) and ``dask_scheduler`` size it. ``cache_library`` names the library whose
node and embedding caches the books use (the target library, or the main library when an experiment
builds a variant library). The whole ingest config is an input
(``ingest_config``) because each book builds the per-book driver from it.

Limitations: workers write into ``LIBRARY/staging`` and the library's caches, so a remote Dask
cluster must see the library on a shared filesystem; a worker process that dies (segfault, OOM kill)
aborts the books still in flight, though the library stays consistent.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hamilton.function_modifiers import config
from hamilton.htypes import Collect, Parallelizable

from folio.nodes.backends.progress import Progress
from folio.nodes.types import BookOutcome, FolioError


def _cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _pool_size(n_books: int, workers: int | None, cores: int) -> int:
    """Worker processes for ``n_books``: ``workers`` (default: the cores), never more than the books."""
    wanted = cores if workers is None else int(workers)
    if wanted < 1:
        raise FolioError("workers", f"workers must be at least 1, not {workers}")
    return max(1, min(wanted, n_books))


def _threads_per_worker(pool_size: int, cores: int) -> int:
    """Torch threads per worker: the cores shared out; 0 (leave torch's default) when in-process."""
    return 0 if pool_size <= 1 else max(1, cores // pool_size)


def _limit_torch_threads(n: int) -> None:
    if n > 0:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def _failure(path: str, exc: BaseException) -> BookOutcome:
    if isinstance(exc, FolioError):
        return BookOutcome(path, error_source=exc.source, error_reason=exc.reason)
    return BookOutcome(path, error_source=path, error_reason=f"ingest failed: {type(exc).__name__}: {exc}")


def _ingest_one(
    path: str,
    library_path: str,
    ingest_config: Mapping[str, Any],
    cache_enabled: bool,
    progress: Progress,
    cache_library: str,
) -> BookOutcome:
    """Run the per-book ingest DAG into a fresh staging directory; every failure is returned, not raised.

    ``cache_library`` is the library whose caches the run uses (the target library, or an experiment's main one).
    """
    from folio.dataflows.caching import last_run
    from folio.dataflows.drivers import ingest_driver
    from folio.dataflows.library import Library
    from folio.nodes.backends.embedding_cache import EmbeddingCache

    if not os.environ.get("FOLIO_DEBUG"):  # a failure comes back as one line, not Hamilton's traceback log
        logging.getLogger("hamilton").setLevel(logging.CRITICAL)
    lib = Library(library_path)
    staging = lib.new_staging_dir(Path(path).stem)
    try:
        cache_lib = Library(cache_library)
        dr = ingest_driver(dict(ingest_config), cache_library=cache_lib.path if cache_enabled else None)
        window_cache = EmbeddingCache(cache_lib.cache_dir / "embeddings")
        try:
            result = dr.execute(
                ["staged_book"],
                inputs={
                    "source_path": path,
                    "staging_dir": str(staging),
                    "embedding_cache": window_cache,
                    "progress": progress,
                },
            )
        finally:
            window_cache.close()
        used = last_run(dr) if cache_enabled else {"executed": [], "from_cache": []}
        return BookOutcome(
            path,
            staged=result["staged_book"],
            cache_executed=tuple(used["executed"]),
            cache_from_cache=tuple(used["from_cache"]),
        )
    except Exception as exc:  # one bad book never stops the others
        shutil.rmtree(staging, ignore_errors=True)
        return _failure(path, exc)


def _in_input_order(outcomes: list[BookOutcome], source_files: tuple[str, ...]) -> tuple[BookOutcome, ...]:
    rank = {path: i for i, path in reversed(list(enumerate(source_files)))}
    return tuple(sorted(outcomes, key=lambda o: rank.get(o.source_file, len(source_files))))


@config.when(executor="local")
def worker_threads__local(source_files: tuple, workers: int | None) -> int:
    """Torch threads per pool process: the cores divided among the processes (0 = in-process)."""
    return _threads_per_worker(_pool_size(len(source_files), workers, _cores()), _cores())


@config.when(executor="dask")
def worker_threads__dask(source_files: tuple, workers: int | None, dask_scheduler: str | None) -> int:
    """Torch threads per Dask worker: a LocalCluster shares out the cores; a remote cluster keeps its own."""
    if dask_scheduler:
        return 0
    return _threads_per_worker(_pool_size(len(source_files), workers, _cores()), _cores())


def book_file(source_files: tuple) -> Parallelizable[str]:
    """Each book file of the ingest, one parallel branch per file."""
    yield from source_files


def book_outcome(
    book_file: str,
    library_path: str,
    cache_library: str,
    ingest_config: dict,
    cache_enabled: bool,
    progress: Progress,
    worker_threads: int,
) -> BookOutcome:
    """One book staged by the per-book ingest DAG (caches of ``cache_library``), or its one-line error."""
    _limit_torch_threads(worker_threads)
    return _ingest_one(book_file, library_path, ingest_config, cache_enabled, progress, cache_library)


def book_outcomes(book_outcome: Collect[BookOutcome], source_files: tuple) -> tuple[BookOutcome, ...]:
    """Every book's outcome, in the order the files were given."""
    return _in_input_order(list(book_outcome), source_files)
