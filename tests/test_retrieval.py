import pytest

from folio.nodes.core.ranking import fuse_convex as _fuse_convex
from folio.nodes.core.ranking import fuse_rrf as _fuse_rrf
from folio.nodes.core.ranking import max_normalised as _max_normalised
from folio.nodes.core.ranking import merge_ranked as _merge
from folio.nodes.core.types import Hit


def _hit(chunk: str, score: float, book: str = "b") -> Hit:
    return Hit(book, "ch", "Chapter", chunk, 0, 10, score, chunk)


def test_scores_are_normalised_by_the_best_of_their_list():
    norm = _max_normalised([_hit("a", 12.0), _hit("b", 9.0), _hit("c", 3.0)])
    assert norm == {("b", "a"): 1.0, ("b", "b"): 0.75, ("b", "c"): 0.25}


def test_convex_fusion_keeps_a_dominant_lexical_top_hit():
    # bm25 strongly prefers "a"; the semantic list ranks "b" first by a hair and "a" second.
    lexical = [_hit("a", 20.0), _hit("b", 6.0), _hit("c", 5.0)]
    semantic = [_hit("b", 0.61), _hit("a", 0.60), _hit("d", 0.30)]
    fused = _fuse_convex(lexical, semantic, 0.7, 3)
    assert [h.chunk_id for h in fused] == ["a", "b", "c"]
    assert fused[0].score == pytest.approx(0.7 * 1.0 + 0.3 * (0.60 / 0.61))


def test_equal_rrf_loses_that_top_hit_when_lists_disagree():
    lexical = [_hit("a", 20.0), _hit("b", 6.0), _hit("c", 5.0)]
    semantic = [_hit("b", 0.61), _hit("d", 0.60), _hit("a", 0.30)]
    assert _fuse_rrf(lexical, semantic, 0.5, 60, 3)[0].chunk_id == "b"
    assert _fuse_convex(lexical, semantic, 0.7, 3)[0].chunk_id == "a"


def test_convex_fusion_records_both_signals():
    fused = _fuse_convex([_hit("a", 3.0), _hit("b", 1.0)], [_hit("a", 0.9), _hit("c", 0.1)], 0.5, 5)
    assert dict(fused[0].signals) == {"lexical": 1.0, "semantic": 1.0}
    assert dict(fused[1].signals)["lexical"] == 0.0 or dict(fused[1].signals)["semantic"] == 0.0
    assert {h.chunk_id for h in fused} == {"a", "b", "c"}


def test_merge_sorts_by_score_across_books_and_cuts():
    merged = _merge([[_hit("a", 1.0, "x")], [_hit("b", 3.0, "y"), _hit("c", 2.0, "y")]], 2)
    assert [(h.book_id, h.chunk_id) for h in merged] == [("y", "b"), ("y", "c")]
