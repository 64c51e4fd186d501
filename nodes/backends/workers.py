"""Worker sizing for library ingest: cores this process may use, pool size, torch threads per worker.

Shared by the library DAG (``nodes.collection``: torch threads in each worker) and the executor that
runs it (``dataflows.parallel``: how many processes), so both size the pool the same way.
"""

from __future__ import annotations

import os

from folio.nodes.types import FolioError


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def pool_size(n_books: int, workers: int | None, cores: int) -> int:
    """Worker processes for ``n_books``: ``workers`` (default: the cores), never more than the books."""
    wanted = cores if workers is None else int(workers)
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
