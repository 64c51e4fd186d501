"""Worker sizing for library ingest: cores this process may use, pool size, torch threads per worker.

Shared by the library DAG (``nodes.ingest.collection``: torch threads in each worker) and the executor that
runs it (``dataflows.parallel``: how many processes), so both size the pool the same way.
"""

from __future__ import annotations

import os

from folio.nodes.core.types import FolioError


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Cores one ingest worker keeps busy: the encoder runs its matrix products on every core it is given
# (measured on 2 cores, issue 14: the 10 sample books took 183 s with one worker, 211 s with two), so
# the default pool is one worker per this many cores; 2-core machines ingest in-process.
CORES_PER_WORKER = 4


def default_workers(cores: int) -> int:
    """The default pool size on ``cores`` cores: one worker per ``CORES_PER_WORKER`` cores, at least one."""
    return max(1, cores // CORES_PER_WORKER)


def pool_size(n_books: int, workers: int | None, cores: int) -> int:
    """Worker processes for ``n_books``: ``workers`` (default: ``default_workers``), never more than the
    books."""
    wanted = default_workers(cores) if workers is None else int(workers)
    if wanted < 1:
        raise FolioError("workers", f"workers must be at least 1, not {workers}")
    return max(1, min(wanted, n_books))


def threads_per_worker(pool_size: int, cores: int) -> int:
    """Torch threads per worker: the cores shared out; 0 (leave torch's default) when in-process."""
    return 0 if pool_size <= 1 else max(1, cores // pool_size)


def limit_torch_threads(n: int) -> None:
    """Set torch's thread count to ``n`` in this process (0: leave it)."""
    if n > 0:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
