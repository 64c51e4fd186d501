"""Worker sizing for library ingest: cores this process may use, pool size, torch threads per worker;
and workers that die with the process that started them (``die_with_owner``).

Shared by the library DAG (``nodes.ingest.collection``: torch threads in each worker) and the executor that
runs it (``dataflows.parallel``: how many processes), so both size the pool the same way.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Sequence

from folio.nodes.core.types import FolioError


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# Ingest worker processes by default: one per ``CORES_PER_WORKER`` cores, and at least two on two or more
# cores. Measured on 2 cores (issue 30, quiet machine): six 90,000-word books took 66.8 s in-process (one
# encoder on both cores, 142 windows/s) and 54.6 s on two workers of one torch thread each (174 windows/s,
# 1.07x the raw encoder's 162); the ten sample books 92.6 s against 88.3 s; two small books 10.0 s
# against 8.7 s. Torch's matrix products scale poorly past one thread at these sizes, and a second
# process overlaps one book's parsing and concept map with another's encoding. (Issue 14's opposite
# figure, 183 s against 211 s, was taken on a loaded machine.) Only 2 cores were measured here.
CORES_PER_WORKER = 2
# Below this many bytes of book files the default ingest stays in-process: starting a worker (torch and
# the encoder) costs a few seconds, which a warm process (``folio serve``, a test run) need not pay.
MIN_POOL_BYTES = 1_000_000


def default_workers(cores: int) -> int:
    """The default pool size on ``cores`` cores: one worker per ``CORES_PER_WORKER`` cores, at least two
    on two or more cores (one on one core)."""
    return 1 if cores < 2 else max(2, cores // CORES_PER_WORKER)


def source_bytes(paths: Sequence[str | os.PathLike[str]]) -> int:
    """Bytes of the book files (a missing one counts nothing: its ingest fails on its own)."""
    total = 0
    for path in paths:
        try:
            total += os.path.getsize(path)
        except OSError:
            continue
    return total


def pool_size(n_books: int, workers: int | None, cores: int, book_bytes: int | None = None) -> int:
    """Worker processes for ``n_books`` of ``book_bytes`` bytes in all: ``workers`` (default:
    ``default_workers``, or in-process below ``MIN_POOL_BYTES``), never more than the books."""
    if workers is None and book_bytes is not None and book_bytes < MIN_POOL_BYTES:
        return 1
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


def die_with_owner(owner_pid: int) -> None:
    """Make this pool worker exit as soon as ``owner_pid`` (the process that started the pool) dies.

    A worker of a killed ingest would otherwise finish its book into ``staging/`` while the next run's
    recovery clears it. The owner is not the worker's parent under ``forkserver`` (and the forkserver
    outlives the owner while workers hold its pipe), so a parent-death signal never fires: a daemon
    thread waits on the owner's pidfd (Linux) or polls its pid, then exits the process. A worker whose
    owner is already gone exits at once.
    """
    try:
        watch = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # not Linux, or a kernel before 5.3: poll instead
        watch = None
    threading.Thread(target=_exit_when_gone, args=(owner_pid, watch), daemon=True).start()


def _exit_when_gone(owner_pid: int, watch: int | None) -> None:
    if watch is not None:
        select.select([watch], [], [])  # readable when the process has exited
        os._exit(1)
    while True:
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:
            pass
        time.sleep(0.5)
