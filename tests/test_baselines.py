"""The bm25s and dense_exact search baselines: pure helpers on toy data, then the search DAG on real Alice."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.dataflows.registry import search_driver
from folio.nodes.backends import baselines
from folio.nodes.backends.baselines import BM25S_INSTALL, Bm25Index, chunk_mean_vectors, top_positions
from folio.nodes.core.types import FolioError, Hit

# --- pure helpers ------------------------------------------------------------------------------


def test_chunk_mean_vectors_normalises_the_mean_of_each_chunks_windows():
    windows = np.array([[1.0, 0.0], [3.0, 4.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float32)
    rowids, matrix = chunk_mean_vectors(windows, [7, 3, 7, 3])
    assert rowids.tolist() == [3, 7]
    # chunk 3: mean (3, 4) -> (0.6, 0.8); chunk 7: mean (0.5, 0.5) -> (1/sqrt 2, 1/sqrt 2)
    np.testing.assert_allclose(matrix, [[0.6, 0.8], [2**-0.5, 2**-0.5]], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-6)


def test_chunk_mean_vectors_keeps_a_zero_mean_at_zero():
    rowids, matrix = chunk_mean_vectors(np.array([[1.0, 2.0], [-1.0, -2.0], [0.0, 5.0]]), [1, 1, 2])
    assert rowids.tolist() == [1, 2]
    np.testing.assert_allclose(matrix, [[0.0, 0.0], [0.0, 1.0]])


def test_chunk_mean_vectors_rejects_mismatched_owners():
    with pytest.raises(ValueError):
        chunk_mean_vectors(np.zeros((3, 2)), [1, 2])


def test_top_positions_orders_by_score_then_position_and_honours_mask_and_floor():
    scores = np.array([0.5, 0.9, 0.5, 0.0, 0.7])
    assert top_positions(scores, 3) == [(1, 0.9), (4, 0.7), (0, 0.5)]
    assert top_positions(scores, 10, mask=np.array([1, 0, 1, 1, 0], dtype=bool)) == [
        (0, 0.5),
        (2, 0.5),
        (3, 0.0),
    ]
    assert [p for p, _ in top_positions(scores, 10, min_score=0.0)] == [1, 4, 0, 2]
    assert top_positions(scores, 0) == []


TEXTS = [
    "The cat sat on the mat and looked at the dog.",
    "A dog and a cat played in the garden all day.",
    "The zebra wandered across the savanna with the cat.",
]


def test_bm25_index_ranks_the_text_with_the_rare_term_first():
    index = Bm25Index(TEXTS)
    top = index.top("zebra cat", 3)
    assert top[0][0] == 2
    assert top[0][1] > top[1][1] > 0
    assert {p for p, _ in top} == {0, 1, 2}  # "cat" is in all three


def test_bm25_index_drops_stopwords_and_unknown_words():
    index = Bm25Index(TEXTS)
    assert index.query_terms("the and of a") == []
    assert index.top("the and of a", 5) == []
    assert index.top("unicorn", 5) == []
    assert index.query_terms("The ZEBRA, unicorn!") == ["zebra"]


def test_bm25_index_mask_restricts_candidates():
    index = Bm25Index(TEXTS)
    assert {p for p, _ in index.top("zebra cat", 3, mask=np.array([True, True, False]))} == {0, 1}
    assert index.top("zebra", 3, mask=np.array([True, True, False])) == []


def test_empty_bm25_index_finds_nothing():
    index = Bm25Index([])
    assert len(index) == 0
    assert index.top("cat", 5) == []


# --- the search DAG on a real library ----------------------------------------------------------


@pytest.fixture
def stores(alice_library: Path) -> tuple:
    baselines.clear_cache()
    yield tuple(Library(alice_library).stores())
    baselines.clear_cache()


def _search(
    mode: str, query: str, stores: tuple, chapter_ids: tuple | None = None, **overrides
) -> tuple[Hit, ...]:
    dr = search_driver(load_config(overrides={"search_mode": mode, **overrides}))
    inputs = {"query": query, "book_stores": stores, "chapter_ids": chapter_ids}
    return dr.execute(["search_results"], inputs=inputs)["search_results"]


def test_bm25s_needs_no_encoder():
    dr = search_driver(load_config(overrides={"search_mode": "bm25s"}))
    upstream = {n.name for n in dr.what_is_upstream_of("search_results")}
    assert "encoder" not in upstream and "query_vector" not in upstream
    dense = search_driver(load_config(overrides={"search_mode": "dense_exact"}))
    assert {"encoder", "query_vector"} <= {n.name for n in dense.what_is_upstream_of("search_results")}


def test_bm25s_puts_a_chunk_with_the_query_words_first(stores):
    hits = _search("bm25s", "Cheshire Cat", stores)
    assert hits and all(re.search(rf"\b{w}\b", hits[0].text, re.IGNORECASE) for w in ("cheshire", "cat"))
    assert all(re.search(r"\b(cheshire|cat)\b", h.text, re.IGNORECASE) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score > 0 for h in hits)
    (store,) = stores
    for h in hits:  # hits are real chunks, located exactly
        assert store.chapter_text(h.chapter_id)[h.start : h.end] == h.text


def test_bm25s_finds_the_tea_party_and_nothing_for_stopwords(stores):
    hits = _search("bm25s", "drinking tea with the Hatter and the March Hare", stores)
    assert "Tea" in hits[0].chapter_title
    assert _search("bm25s", "the and of", stores) == ()


def test_dense_exact_returns_k_sorted_cosines_and_a_relevant_top_hit(stores):
    hits = _search("dense_exact", "a baby that turns into a pig", stores, search_k=7)
    assert len(hits) == 7
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert hits[0].chapter_title == "Pig And Pepper"
    assert len({h.chunk_id for h in hits}) == 7


def test_dense_exact_scores_are_the_cosine_of_the_chunk_mean_vector(stores, encoder):
    query = "playing croquet with flamingos"
    (top, *_) = _search("dense_exact", query, stores)
    (store,) = stores
    book = baselines.dense_book(store)
    row = [h.chunk_id for h in book.chunks.hits].index(top.chunk_id)
    assert float(book.matrix[row] @ encoder.encode_query(query)) == pytest.approx(top.score, abs=1e-5)
    assert len(book.chunks.hits) == store.descriptor["n_chunks"]


@pytest.mark.parametrize("mode", ["bm25s", "dense_exact"])
def test_chapter_ids_restrict_hits(stores, mode):
    (store,) = stores
    titles = {title: cid for cid, title in store.titles.items()}
    chapters = (titles["Pig And Pepper"], titles["A Mad Tea-Party"])
    hits = _search(mode, "the Cheshire Cat grinning", stores, chapter_ids=chapters)
    assert hits and {h.chapter_id for h in hits} <= set(chapters)
    assert _search(mode, "the Cheshire Cat grinning", stores, chapter_ids=()) == ()


@pytest.mark.parametrize("mode", ["bm25s", "dense_exact"])
def test_repeated_queries_reuse_the_cached_index(stores, mode, monkeypatch):
    builder_name = "build_bm25_book" if mode == "bm25s" else "build_dense_book"
    built = []
    original = getattr(baselines, builder_name)

    def counting(store):
        built.append(store.book_id)
        return original(store)

    monkeypatch.setattr(baselines, builder_name, counting)
    first = _search(mode, "the White Rabbit with a watch", stores)
    second = _search(mode, "the Queen shouting off with her head", stores)
    assert first and second and first != second
    assert built == [s.book_id for s in stores]
    keys = [k for k in baselines.cached_keys() if k[0] == mode]
    assert len(keys) == len(stores)
    (store,) = stores
    assert keys[0][1:4] == (store.book_id, store.descriptor["content_hash"], str(store.index.directory))


def test_missing_bm25s_is_an_early_folio_error(stores, monkeypatch):
    monkeypatch.setitem(sys.modules, "bm25s", None)
    baselines.clear_cache()
    with pytest.raises(FolioError, match=re.escape("pip install 'folio[baselines]'")) as info:
        _search("bm25s", "Cheshire Cat", stores)
    assert info.value.source == "search_mode" and info.value.reason == BM25S_INSTALL
    assert baselines.cached_keys() == []
