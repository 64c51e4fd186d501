"""Progress reporting handed to the ingest DAG: a tqdm bar on a terminal, silence otherwise."""

from __future__ import annotations

import sys
import threading


class Progress:
    """Base progress sink; reports nothing (``--quiet``, not a terminal, tests)."""

    def add_total(self, n: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


NullProgress = Progress


class BarProgress(Progress):
    """A thread-safe tqdm bar whose total grows as books announce their windows: shows done/total and ETA."""

    def __init__(self, desc: str = "embedding", unit: str = "window") -> None:
        from tqdm import tqdm

        self._lock = threading.Lock()
        self._bar = tqdm(total=0, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)

    def add_total(self, n: int) -> None:
        with self._lock:
            self._bar.total += n
            self._bar.refresh()

    def advance(self, n: int) -> None:
        with self._lock:
            self._bar.update(n)

    def close(self) -> None:
        self._bar.close()


def progress_for(quiet: bool, stream: object = sys.stderr) -> Progress:
    """A bar only when asked for and the stream is a terminal."""
    if quiet or not getattr(stream, "isatty", lambda: False)():
        return NullProgress()
    return BarProgress()
