"""The scaling bench (``make bench``, section "scaling"): its measurements on small generated libraries."""

from __future__ import annotations

import numpy as np

from bench.scaling import (
    MemoEncoder,
    _hashed_vectors,
    added_books,
    generated_library,
    scalar_kind_measurement,
    scaling_plot,
    scaling_queries,
    scaling_table,
    search_latencies,
    size_measurement,
    small_books,
    write_book_files,
)
from folio.dataflows.library import Library


class _CountingEncoder:
    """Hashed vectors standing in for a model, counting the texts it is asked to encode."""

    model_id = "counting"

    def __init__(self) -> None:
        self.texts = 0

    def encode(self, texts):
        self.texts += len(texts)
        return _hashed_vectors(texts)


def test_memo_encoder_encodes_each_text_once_across_runs(tmp_path, data_dir):
    texts = [b.text for b in small_books(data_dir, 4)]
    inner = _CountingEncoder()
    memo = MemoEncoder(inner, tmp_path / "embeddings.npz")
    first = memo.encode([*texts, texts[0]])
    assert inner.texts == 4 and first.shape == (5, 384)
    memo.save()
    again = MemoEncoder(inner, tmp_path / "embeddings.npz")
    np.testing.assert_array_equal(again.encode(texts), first[:4])
    assert inner.texts == 4  # read back from the file, not encoded again


def test_added_books_and_queries_come_from_the_shared_texts(data_dir):
    library_texts = {b.text for b in small_books(data_dir, 100)}
    extra = added_books(data_dir)
    assert len(extra) == 3 and all(len(b.text.split()) == 400 for b in extra)
    assert not {b.text for b in extra} & library_texts
    first_ten = " ".join(b.text for b in small_books(data_dir, 10))
    queries = scaling_queries(data_dir)
    assert len(set(queries)) >= 20
    assert all(q in first_ten for q in queries[:20])  # word runs every bench library holds


def test_scalar_kinds_keep_the_final_top10_and_shrink_the_index(tmp_path, data_dir):
    books = small_books(data_dir, 60)
    libraries = {d: generated_library(tmp_path / d, books, dtype=d).path for d in ("f32", "i8")}
    for lib in libraries.values():
        Library(lib).close()
    probes = _hashed_vectors([f"probe {i}" for i in range(30)])
    kinds = scalar_kind_measurement(libraries, probes)
    assert kinds["f32"]["windows"] == kinds["i8"]["windows"] > 200
    assert kinds["i8"]["bytes_per_window"] < kinds["f32"]["bytes_per_window"] / 2
    for measured in kinds.values():
        assert measured["final_top10_agreement"] >= 0.95, measured  # exact re-scoring of the candidates
        assert measured["candidate_recall@10"] >= measured["hnsw_recall@10"] - 1e-9


def test_latencies_resources_and_one_added_book_on_small_real_libraries(tmp_path, data_dir, encoder):
    libs = [
        generated_library(tmp_path / f"lib-{n}", small_books(data_dir, n), encoder=encoder).path
        for n in (3, 6)
    ]
    for path in libs:
        Library(path).close()
    queries = scaling_queries(data_dir, n=4)
    latencies = search_latencies([str(p) for p in libs], queries, rounds=1)
    assert [row["books"] for row in latencies] == [3, 6]
    for row in latencies:
        assert row["searches"]["hybrid"]["queries"] == len(queries)
        assert 0 < row["searches"]["lexical"]["p50_ms"] <= row["searches"]["lexical"]["p95_ms"]
        assert row["parts_p50_ms"]["query_encoding"] > 0 and row["parts_p50_ms"]["lexical_index"] > 0

    added = [str(p) for p in write_book_files(added_books(data_dir, n=1), tmp_path / "added")]
    (tmp_path / "scratch").mkdir()
    resources = size_measurement(str(libs[1]), added, str(tmp_path / "scratch"), queries, loop_searches=40)
    assert resources["books"] == 6 and resources["books_after"] == 7
    # in-process here (the test process holds other tests' files): the loop must not add any; the bound
    # of 64 is the bench's, measured in a fresh process
    assert resources["open_files_after_loop"] == resources["open_files"]
    assert resources["add_one_book"]["into_library_s"] > 0 and resources["add_one_book"]["into_empty_s"] > 0

    rows = [{"size": 6, **latencies[1], **resources}]
    table = scaling_table(rows)
    assert "| 6 | " in table and table.count("\n") == 6
    png = scaling_plot(rows, tmp_path / "out" / "scaling.png")
    assert png.read_bytes().startswith(b"\x89PNG")
