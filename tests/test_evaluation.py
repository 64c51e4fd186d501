import json

import pytest

from nodes.evaluation import EvalRecord, GoldSpan, _is_hit, _metrics, qa_items
from nodes.types import FolioError, Hit


def _rec(rank, located=True, ms=10.0):
    return EvalRecord("q", "?", located, rank, ms, ())


def test_metrics_on_a_hand_computed_case():
    records = [_rec(1, ms=10), _rec(3, ms=20), _rec(None, ms=30), _rec(12, ms=40), _rec(None, located=False, ms=0)]
    m = _metrics(records)
    assert m["n"] == 5 and m["located"] == 4
    assert m["hit@1"] == 0.25
    assert m["hit@5"] == 0.5
    assert m["hit@10"] == 0.5
    assert m["mrr@10"] == round((1 + 1 / 3) / 4, 4)
    assert m["p50_ms"] == 25.0  # over the searched (located) questions only


def _h(start, end, chapter="c1", text=""):
    return Hit("b", chapter, "T", "k", start, end, 1.0, text)


def test_chunk_covering_half_the_gold_span_is_a_hit():
    gold = GoldSpan("b", "c1", 100, 200)
    assert _is_hit(_h(150, 400), gold)  # covers exactly half
    assert not _is_hit(_h(151, 400), gold)
    assert not _is_hit(_h(100, 200, chapter="c2"), gold)


def test_quote_gold_needs_the_quote_in_the_chunk():
    gold = GoldSpan("b", "c1", 0, 10, quote="call me ishmael")
    assert _is_hit(_h(0, 5, text="Call me   Ishmael. Some years ago"), gold)
    assert not _is_hit(_h(0, 5, text="Call me Ahab."), gold)


def test_jsonl_questions_are_read(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Who?", "book_file": "books/x.txt", "gold_quote": "q", "answers": ["a"]}) + "\n")
    (item,) = qa_items(str(path))
    assert item.question == "Who?" and item.book_file == "books/x.txt" and item.answers == ("a",)


def test_broken_jsonl_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Who?"}\n')
    with pytest.raises(FolioError, match=r"q\.jsonl:1"):
        qa_items(str(path))


def test_fairytaleqa_file_reads_every_question_with_its_gold_sections(data_dir):
    items = qa_items(str(data_dir / "qa/fairytaleqa/questions.csv"))
    assert len(items) == 365
    assert all(item.passages for item in items)
