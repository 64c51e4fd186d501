"""Vector segments: the library's HNSW as a few immutable files that grow by merging, never rewritten.

Each segment is one usearch HNSW file, ``vectors-<G>.usearch``, written by the commit of generation
``G`` and never changed after: it holds the windows whose keys lie in ``lo..hi`` (keys are never
reused and a commit's new windows take the next keys, so a segment is a run of keys). The library
database records the segments of each generation (table ``segments``: ``generation, lo, hi, size,
live``) in the same transaction as the rows, so a crash leaves the old list of files or the new one.

A commit writes work proportional to its books: the new windows go to a new segment, and the
newest segments are folded into it only when the merge policy says so (``merge_plan``: a tiered
policy, ``MERGE_FACTOR`` segments of one size level make one of the next; a fold stays under
``INLINE_MERGE_WINDOWS`` windows; past ``MAX_SEGMENTS`` files, binary folds keep the count down).
Removing a book writes no vectors file at all: its windows' rows go, the segments' ``live`` counts
drop, and a search skips the dead keys (each segment is searched ``size / live`` times wider, see
``search_breadths``); a segment with nothing live is dropped. ``folio doctor --compact`` folds every
segment into one (``LibraryIndex.compact``). A search asks every segment for its candidates and
re-scores their union exactly from the stored float32 vectors, so the merge across segments is exact.

Config keys: none (the constants below). Limitations: segments are HNSW at every size (a segment of
one book's windows is small enough that its HNSW search is in effect exact); each open segment holds
one file descriptor (at most ``MAX_SEGMENTS``); a merge reads its windows' float32 vectors back from
the database.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from folio.nodes.core.types import FolioError

if TYPE_CHECKING:
    from usearch.index import Index

MERGE_FACTOR = 4  # segments of one size level folded into one of the next
SEGMENT_FLOOR = 1024  # windows: segments up to this size share the lowest level
INLINE_MERGE_WINDOWS = 1_048_576  # a commit folds segments while the result stays this small...
MAX_SEGMENTS = 16  # ...unless the library would hold more segment files than this
BUILD_BATCH = 16_384  # windows read from the database and added to an HNSW at a time


def usearch_index() -> type[Index]:
    """usearch's ``Index`` class. ONNX Runtime, when installed, is imported first: importing it after
    usearch's native modules crashes the process (a segfault, measured with onnxruntime 1.32), and the
    ``embedder: onnx`` encoder may load after an index was opened in the same process."""
    if "onnxruntime" not in sys.modules and importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401

    from usearch.index import Index as UsearchIndex

    return UsearchIndex


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(tmp: Path, target: Path) -> None:
    """``os.replace(tmp, target)``; a ``FolioError`` naming ``target`` when it cannot be replaced (a
    folder where the vectors file should be), ``tmp`` removed."""
    try:
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise FolioError(str(target), f"cannot be replaced ({exc.strerror or exc}): move it away") from None


@dataclass(frozen=True)
class Segment:
    """One vectors file: written by generation ``generation`` (``vectors-<generation>.usearch``), holding
    ``size`` windows with keys in ``lo..hi``, ``live`` of which are still in the library."""

    generation: int
    lo: int
    hi: int
    size: int
    live: int


def segment_level(windows: int, floor: int | None = None, factor: int = MERGE_FACTOR) -> int:
    """The size level of a segment of ``windows`` live windows (0 below ``floor * factor``)."""
    floor = floor or SEGMENT_FLOOR
    return int(math.log(max(windows, floor) / floor, factor) + 1e-9)


def _tiered(lives: Sequence[int], new: int, factor: int, cap: float) -> int:
    """The tail to fold: the new segment and the ``factor - 1`` or more segments before it of its
    level or below, level by level, while the result stays under ``cap``."""
    fold, combined = 0, new
    while True:
        level = segment_level(combined, factor=factor)
        run = 0
        while (
            fold + run < len(lives)
            and segment_level(lives[len(lives) - 1 - fold - run], factor=factor) <= level
        ):
            run += 1
        if run + 1 < factor:
            return fold
        merged = combined + sum(lives[len(lives) - fold - run : len(lives) - fold])
        if merged > cap:
            return fold
        fold, combined = fold + run, merged


def merge_plan(
    lives: Sequence[int], new: int, cap: int | None = None, max_segments: int | None = None
) -> int:
    """How many of the newest segments (``lives``: their live windows, oldest first) to fold into the
    segment of ``new`` windows a commit writes: tiered by ``MERGE_FACTOR`` under ``cap`` windows; when
    the library would hold more than ``max_segments`` files, binary (factor 2, no cap), and at worst
    as many of the newest as keep it at ``max_segments``. Each window is rewritten a few times over its
    life (about 4 times for 2 M windows added a 90,000-word book at a time: tests/test_vector_segments)."""
    cap = cap or INLINE_MERGE_WINDOWS
    max_segments = max_segments or MAX_SEGMENTS
    fold = _tiered(lives, new, MERGE_FACTOR, cap)
    if len(lives) - fold + 1 > max_segments:
        fold = max(fold, _tiered(lives, new, 2, math.inf))
    return max(fold, len(lives) + 1 - max_segments)


def after_removal(segments: Sequence[Segment], removed_keys: Sequence[int]) -> list[Segment]:
    """The segments with ``removed_keys`` no longer live; a segment with nothing live left is dropped."""
    keys = np.sort(np.asarray(removed_keys, dtype=np.int64))
    out = []
    for s in segments:
        gone = int(np.searchsorted(keys, s.hi, side="right") - np.searchsorted(keys, s.lo, side="left"))
        if s.live - gone > 0:
            out.append(replace(s, live=s.live - gone))
    return out


def search_breadths(segments: Sequence[Segment], want: int) -> list[int]:
    """Candidates to ask of each segment for ``want`` live ones: wider by its share of dead windows,
    never more than it holds."""
    return [min(s.size, math.ceil(want * s.size / max(s.live, 1))) for s in segments]


def build_index(
    settings: dict[str, str], batches: Iterable[tuple[np.ndarray, np.ndarray]]
) -> tuple[Any, int]:
    """An HNSW with the library's ``settings`` (ndim, dtype, connectivity, expansion_add) holding every
    ``(keys, float32 vectors)`` batch, and the number of windows added."""
    index = usearch_index()(
        ndim=int(settings["ndim"]),
        metric="cos",
        dtype=settings.get("dtype", "i8"),
        connectivity=int(settings.get("connectivity", 16)),
        expansion_add=int(settings.get("expansion_add", 128)),
    )
    added = 0
    for keys, vectors in batches:
        if len(keys):
            threads = 1 if len(keys) < BUILD_BATCH else 0  # a big merge uses every core
            matrix = np.ascontiguousarray(vectors, dtype=np.float32)
            index.add(keys.astype(np.uint64), matrix, threads=threads)
            added += len(keys)
    return index, added


def save_index(index: Any, target: Path) -> None:
    """Write ``index`` to ``target`` durably: a temporary file, fsync, rename, fsync of the folder."""
    tmp = target.with_suffix(".usearch.tmp")
    index.save(str(tmp))
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    replace_file(tmp, target)
    fsync_dir(target.parent)


def window_batches(
    conn: Any, lo: int, hi: int, batch: int = BUILD_BATCH
) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """``(keys, float32 vectors)`` of the stored windows with keys in ``lo..hi``, ``batch`` at a time."""
    start = lo
    while start <= hi:
        rows = list(
            conn.execute(
                "SELECT key, vector FROM windows WHERE key BETWEEN ? AND ? ORDER BY key LIMIT ?",
                (start, hi, batch),
            )
        )
        if not rows:
            return
        keys = np.array([r[0] for r in rows], dtype=np.int64)
        yield keys, np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        start = int(keys[-1]) + 1
