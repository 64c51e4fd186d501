"""Progress reporting handed to the ingest DAG: a tqdm bar on a terminal, silence otherwise."""

from __future__ import annotations

import sys
import threading


class Progress:
    """Base progress sink; reports nothing (``--quiet``, not a terminal, tests)."""

    def add_total(self, n: float) -> None:
        pass

    def advance(self, n: float) -> None:
        pass

    def book_finished(self, source_file: str, n_chunks: int) -> None:
        """A book of the ingest is done (installed, or failed with ``n_chunks`` 0), wherever it ran."""

    def close(self) -> None:
        pass


NullProgress = Progress


class BarProgress(Progress):
    """A thread-safe tqdm bar whose total grows as books announce their windows: shows done/total and ETA."""

    def __init__(self, desc: str = "embedding", unit: str = "chunk") -> None:
        self._lock = threading.Lock()
        self._desc, self._unit = desc, unit
        self._bar = None  # drawn on first use, so a run that embeds nothing prints nothing

    def _ensure(self):
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=0,
                desc=self._desc,
                unit=self._unit,
                file=sys.stderr,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} {unit}s [{elapsed}<{remaining}]",
            )
        return self._bar

    def add_total(self, n: float) -> None:
        with self._lock:
            bar = self._ensure()
            bar.total += n
            bar.refresh()

    def advance(self, n: float) -> None:
        with self._lock:
            bar = self._ensure()
            if bar.n + n > bar.total:  # announced totals are rounded: never past 100% (tqdm warns)
                bar.total = bar.n + n
            bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def progress_for(
    quiet: bool, stream: object = sys.stderr, desc: str = "embedding", unit: str = "chunk"
) -> Progress:
    """A bar (``desc``, counting ``unit``s) only when asked for and the stream is a terminal."""
    if quiet or not getattr(stream, "isatty", lambda: False)():
        return NullProgress()
    return BarProgress(desc, unit)
