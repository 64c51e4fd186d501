"""The segmented vector index (issue 30): the merge policy alone, then real libraries (generated books,
hashed vectors, no model) whose writes touch only their own segment, whose searches across segments
agree with an exact scan, and whose compaction and earlier single-file layout keep every answer.
Crash safety of every step (a merge and a dropped segment included) is in tests/test_library_index.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import numpy as np
import pytest

from bench.scaling import generated_library, small_books
from folio.dataflows.library import Library
from folio.nodes.backends import vector_segments
from folio.nodes.backends.library_index import LibraryIndex, best_per_chunk, vector_matrix
from folio.nodes.backends.vector_segments import (
    INLINE_MERGE_WINDOWS,
    MAX_SEGMENTS,
    Segment,
    after_removal,
    merge_plan,
    search_breadths,
    segment_level,
)


# --- the policy -------------------------------------------------------------------------------------
def test_segment_levels_grow_by_the_merge_factor():
    assert [segment_level(n) for n in (1, 1024, 4095, 4096, 16_384, 65_536)] == [0, 0, 0, 1, 2, 3]
    assert segment_level(64, floor=8) == 1


def test_a_new_segment_folds_the_newest_of_its_level_only_when_there_are_enough():
    assert merge_plan([], 1300) == 0
    assert merge_plan([1300, 1300], 1300) == 0  # three of level 0: kept
    assert merge_plan([1300, 1300, 1300], 1300) == 3  # four: one segment of level 0 or 1
    assert merge_plan([200_000, 1300, 1300, 1300], 1300) == 3  # the big one is of another level
    assert merge_plan([20_000, 20_000, 20_000, 5_000, 5_000, 5_000], 5_000) == 6  # level by level


def test_a_fold_past_the_inline_cap_waits_for_compaction_unless_files_would_pile_up():
    big = INLINE_MERGE_WINDOWS // 3
    assert merge_plan([big, big, big], big) == 0  # would write more than the cap
    many = [INLINE_MERGE_WINDOWS] * MAX_SEGMENTS
    assert merge_plan(many, 1300) == 1  # the library keeps at most MAX_SEGMENTS files


def test_two_million_windows_added_a_book_at_a_time_stay_in_few_files_and_are_rewritten_few_times():
    """1,540 books of 1,300 windows (90,000 words each) added one by one, with 1 in 20 removed."""
    rng = random.Random(3)
    lives: list[int] = []
    added = written = 0
    biggest = 0
    for _ in range(1540):
        if lives and rng.random() < 0.05:  # a removed book: its segment's live count drops
            i = rng.randrange(len(lives))
            lives[i] = max(0, lives[i] - 1300)
            lives = [n for n in lives if n]
        fold = merge_plan(lives, 1300)
        size = 1300 + sum(lives[len(lives) - fold :])
        lives = [*lives[: len(lives) - fold], size]
        added += 1300
        written += size
        biggest = max(biggest, size)
        assert len(lives) <= MAX_SEGMENTS
    assert sum(lives) > 1_900_000
    assert written / added < 5  # each window is written a few times over its life, not once per commit
    assert biggest <= INLINE_MERGE_WINDOWS  # the largest fold a commit pays for (about 330,000 windows)


def test_removed_keys_lower_the_live_counts_and_an_empty_segment_is_dropped():
    segments = [Segment(1, 1, 10, 10, 10), Segment(2, 11, 14, 4, 4), Segment(3, 15, 20, 6, 6)]
    kept = after_removal(segments, [11, 12, 13, 14, 3, 20])
    assert kept == [Segment(1, 1, 10, 10, 9), Segment(3, 15, 20, 6, 5)]
    assert search_breadths(kept, 4) == [5, 5]  # wider by the dead share, never past the size
    assert search_breadths([Segment(1, 1, 100, 100, 25)], 40) == [100]


# --- real libraries ---------------------------------------------------------------------------------
def exact_top(index: LibraryIndex, probe: np.ndarray, k: int) -> list[tuple[str, str]]:
    """The top ``k`` (book, chunk) by a float32 scan of every stored window."""
    conn = apsw.Connection(str(index.path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(conn.execute("SELECT w.chunk_rowid, w.vector FROM windows w"))
        names = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT rowid, book_id, chunk_id FROM chunks")}
    finally:
        conn.close()
    sims = vector_matrix([r[1] for r in rows]) @ probe
    top = best_per_chunk(np.array([r[0] for r in rows]), sims.astype(np.float64), k)
    return [names[r] for r, _ in top]


def vectors_files(path: Path) -> dict[str, int]:
    """Each vectors file's name and inode (a rewritten file gets a new inode)."""
    return {p.name: p.stat().st_ino for p in path.glob("vectors-*")}


@pytest.fixture(scope="module")
def pieces(data_dir):
    return small_books(data_dir, 12, words=300)


def test_each_write_touches_only_its_own_segment_and_searches_merge_exactly(pieces, tmp_path, monkeypatch):
    monkeypatch.setattr(vector_segments, "SEGMENT_FLOOR", 8)  # 8 books of 4 windows: a level above 1 book
    path = tmp_path / "library"
    lib = generated_library(path, pieces[:8])  # one commit: one segment
    try:
        index = lib.index
        (first,) = index.segments()
        before = vectors_files(path)
        for i, piece in enumerate(pieces[8:11]):  # three books, one commit each
            generated_library(path, [piece])
            segments = index.segments()
            assert len(segments) == 2 + i and segments[0] == first
            new = segments[-1]
            book = next(d for d in index.descriptors() if d["title"] == piece.title)
            assert new.size == book["n_windows"]  # the new file holds only the new book's windows
            now = vectors_files(path)
            assert {n: now[n] for n in before} == before  # no earlier file rewritten
            before = now
        generated_library(path, [pieces[11]])  # the fourth small segment folds the other three in
        segments = index.segments()
        assert len(segments) == 2 and segments[0] == first and segments[1].lo == segments[0].hi + 1
        assert index.check() == []
        rng = np.random.default_rng(5)
        probes = [rng.standard_normal(384).astype(np.float32) for _ in range(20)]
        for probe in probes:
            probe /= np.linalg.norm(probe)
            hits = index.semantic(probe, 5)
            assert [(h.book_id, h.chunk_id) for h in hits] == exact_top(index, probe, 5)

        removed = index.descriptors()[0]["book_id"]
        files = vectors_files(path)
        with lib.writer():
            lib.remove(removed)
        assert vectors_files(path).items() <= files.items()  # removing writes no vectors file
        assert sum(s.live for s in index.segments()) == sum(d["n_windows"] for d in index.descriptors())
        assert index.check() == []
        for probe in probes:
            hits = index.semantic(probe, 5)
            assert removed not in {h.book_id for h in hits}
            assert [(h.book_id, h.chunk_id) for h in hits] == exact_top(index, probe, 5)
        answers = [[(h.chunk_id, round(h.score, 5)) for h in index.semantic(p, 5)] for p in probes]

        with lib.writer():
            windows = index.compact()
        assert len(index.segments()) == 1 and len(vectors_files(path)) == 1
        assert windows == sum(d["n_windows"] for d in index.descriptors())
        assert index.check() == []
        assert [[(h.chunk_id, round(h.score, 5)) for h in index.semantic(p, 5)] for p in probes] == answers
    finally:
        lib.close()


def test_a_library_of_the_single_file_layout_is_read_and_then_written_in_segments(pieces, tmp_path):
    path = tmp_path / "library"
    lib = generated_library(path, pieces[:4])
    probe = lib.index.window_vectors(lib.book_ids()[1])[1][0]
    expected = [(h.chunk_id, round(h.score, 5)) for h in lib.index.semantic(probe, 5)]
    assert [(h.book_id, h.chunk_id) for h in lib.index.semantic(probe, 5)] == exact_top(lib.index, probe, 5)
    (name,) = vectors_files(path)
    lib.close()
    conn = apsw.Connection(str(path / "library.sqlite"))
    conn.execute("DROP TABLE segments")  # as the layout before segments wrote it
    conn.close()
    reader = LibraryIndex(path)  # creates the table again, empty
    try:
        (legacy,) = reader.segments()
        assert reader.vectors_path(legacy.generation).name == name and not reader.vectors_missing()
        assert [(h.chunk_id, round(h.score, 5)) for h in reader.semantic(probe, 5)] == expected
    finally:
        reader.close()
    lib = generated_library(path, pieces[4:5])  # the next commit records the segments
    try:
        assert len(lib.index.segments()) == 2 and lib.index.check() == []
        hits = lib.index.semantic(probe, 5)
        assert [(h.book_id, h.chunk_id) for h in hits] == exact_top(lib.index, probe, 5)
        assert sorted(vectors_files(path)) == sorted(p.name for p in lib.index.segment_files())
    finally:
        lib.close()


def test_doctor_compact_folds_the_segments_and_says_so(pieces, tmp_path):
    from folio.dataflows.doctor import compact

    path = tmp_path / "library"
    generated_library(path, pieces[:3], batch=1).close()
    lib = Library(path)
    try:
        assert len(lib.index.segments()) == 3
        line = compact(lib)
        assert line.startswith("compacted: 3 vector segments into 1 (")
        assert len(list(path.glob("vectors-*"))) == 1 and lib.index.check() == []
    finally:
        lib.close()
