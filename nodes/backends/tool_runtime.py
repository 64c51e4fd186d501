"""What the book tools run within: the question's ``ToolBudget`` (every tool call and LLM request spends
one unit; the call after the last is refused with ``BudgetExceeded``), a conversation's ``Session``
cache, and ``shared_pool(size)``, the one long-lived thread pool of a process for cross-source fusion:
a ``DaemonPool`` of daemon threads, never joined, so a source job that fusion abandoned at its deadline
never keeps the process from exiting (a ``ThreadPoolExecutor``'s workers are joined at interpreter
exit); ``PendingJobs`` waits for the jobs submitted to it until one deadline.

``nodes.backends.book_tools`` re-exports these names (its callers import them there).

Config: none. Limitations: a job abandoned at its deadline keeps running in the pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any

from folio.nodes.backends.llm import LLMError
from folio.nodes.core.types import Deadline, FolioError


class BudgetExceeded(LLMError):
    """A tool or LLM call refused because the question's tool budget is spent."""


class SemanticUnavailable(FolioError):
    """Semantic search cannot run (no encoder, or the vector index failed)."""


class WideningRefused(FolioError):
    """A whole-book search after the one widening the question is allowed (agent mode)."""


class ToolBudget:
    """Counts tool calls (router and LLM requests included); refuses the call after ``limit``."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = int(limit)
        self.calls: list[str] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return len(self.calls)

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    def spend(self, name: str) -> None:
        """Count one call of ``name``; ``BudgetExceeded`` when the budget is already spent."""
        with self._lock:
            if len(self.calls) >= self.limit:
                self.refused.append(name)
                raise BudgetExceeded(
                    "tool budget", f"{name} refused: the budget of {self.limit} tool calls is spent"
                )
            self.calls.append(name)

    def refund(self, name: str) -> None:
        """Give back one counted call of ``name`` (a call that could not run at all costs nothing)."""
        with self._lock:
            for i in range(len(self.calls) - 1, -1, -1):
                if self.calls[i] == name:
                    del self.calls[i]
                    return

    def on_llm_call(self, payload: dict[str, Any]) -> None:
        """``OpenAIChatClient(on_call=...)`` hook: every LLM request is a tool call."""
        self.spend("llm")


class Session:
    """In-session cache of concept-map lookups and retrieval results (one conversation)."""

    def __init__(self) -> None:
        self._values: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        """The value stored under ``key``, made (outside the lock) on first request."""
        with self._lock:
            if key in self._values:
                self.hits += 1
                return self._values[key]
        value = make()
        with self._lock:
            self.misses += 1
            self._values.setdefault(key, value)
            return self._values[key]

    def __len__(self) -> int:
        return len(self._values)


class DaemonPool:
    """``size`` daemon worker threads (started on the first ``submit``) running jobs in order of
    submission; ``submit(fn, *args)`` gives a ``concurrent.futures.Future``. Never shut down or joined:
    a job still running when the process exits dies with it."""

    def __init__(self, size: int, name: str = "folio-fusion") -> None:
        self.size = max(1, int(size))
        self.name = name
        self._jobs: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if not self._started:
                for i in range(self.size):
                    threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True).start()
                self._started = True
        self._jobs.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the waiting caller, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
            del future, fn, args


_POOLS: dict[int, DaemonPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(size: int) -> DaemonPool:
    """The process-wide fusion pool of ``size`` daemon workers (created once, never shut down)."""
    size = max(1, int(size))
    with _POOLS_LOCK:
        if size not in _POOLS:
            _POOLS[size] = DaemonPool(size)
        return _POOLS[size]


# --- pending source jobs (cross-source fusion) ---------------------------------------------------------


class PendingJobs:
    """Source jobs submitted to the fusion pool; ``collect`` waits for them until one deadline.

    Each job runs ``fn(clause)`` in a copy of the submitting thread's ``contextvars`` context. A job
    still running at the deadline is abandoned: it keeps running in the pool, and its result is dropped.
    """

    def __init__(self, pool: DaemonPool, jobs: Sequence[tuple[str, str, Callable[[str], Any]]]) -> None:
        import contextvars
        import time

        self.started = time.monotonic()
        self.futures = []
        for source, clause, fn in jobs:
            context = contextvars.copy_context()
            self.futures.append((source, clause, pool.submit(context.run, fn, clause)))

    def collect(
        self, timeout: float, deadline: Deadline | None = None
    ) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, str]]]:
        """(source, clause, result) of the jobs done by ``started + timeout`` (or by ``deadline``, when
        that is sooner); (source, clause, why) of the rest."""
        import time
        from concurrent.futures import wait

        until = self.started + float(timeout)
        why = f"timed out after {float(timeout):g} s"
        if deadline is not None and deadline.at < until:
            until, why = deadline.at, f"the ask's deadline of {deadline.seconds:g} s passed"
        wait([f for _, _, f in self.futures], timeout=max(0.0, until - time.monotonic()))
        done: list[tuple[str, str, Any]] = []
        failed: list[tuple[str, str, str]] = []
        for source, clause, future in self.futures:
            if not future.done():
                failed.append((source, clause, why))
            elif future.exception() is not None:
                exc = future.exception()
                reason = exc.reason if isinstance(exc, FolioError) else f"{type(exc).__name__}: {exc}"
                failed.append((source, clause, reason))
            else:
                done.append((source, clause, future.result()))
        return done, failed
