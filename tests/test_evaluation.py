import json

import pytest

from folio.nodes.evaluation import EvalRecord, GoldSpan, _is_hit, _metrics, qa_items
from folio.nodes.types import FolioError, Hit


def _rec(rank, located=True, ms=10.0):
    return EvalRecord("q", "?", located, rank, ms, ())


def test_metrics_on_a_hand_computed_case():
    records = [
        _rec(1, ms=10),
        _rec(3, ms=20),
        _rec(None, ms=30),
        _rec(12, ms=40),
        _rec(None, located=False, ms=0),
    ]
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
    path.write_text(
        json.dumps({"question": "Who?", "book_file": "books/x.txt", "gold_quote": "q", "answers": ["a"]})
        + "\n"
    )
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


# --- answers and Kiwix questions -------------------------------------------------------------------

from folio.nodes.evaluation import AnswerCheck, QAItem, _check, _contains_answer  # noqa: E402
from folio.nodes.types import Answer, Citation  # noqa: E402


def _chk(contained=True, grounded=True, unsupported=False, gold_cited=True, calls=2, ms=10.0):
    return AnswerCheck("a", contained, grounded, unsupported, gold_cited, calls, ms)


def test_answer_metrics_on_a_hand_computed_case():
    records = [
        EvalRecord("1", "?", True, 1, 5.0, (), check=_chk(ms=10)),
        EvalRecord(
            "2", "?", True, None, 5.0, (), check=_chk(contained=False, gold_cited=False, calls=4, ms=20)
        ),
        EvalRecord(
            "3",
            "?",
            True,
            2,
            5.0,
            (),
            check=_chk(contained=None, grounded=None, unsupported=True, calls=3, ms=30),
        ),
        EvalRecord(
            "4", "?", False, None, 0.0, (), check=_chk(grounded=False, gold_cited=False, calls=1, ms=40)
        ),
    ]
    m = _metrics(records)
    assert m["answered"] == 4
    assert m["answer_contained_rate"] == round(2 / 3, 4)  # the question without accepted answers is left out
    assert m["grounded_rate"] == round(2 / 3, 4)  # the answer without citations is left out
    assert m["unsupported_rate"] == 0.25
    assert m["gold_cited_rate"] == round(2 / 3, 4)  # over located questions only
    assert m["tool_calls_mean"] == 2.5
    assert m["answer_p50_ms"] == 25.0


def test_retrieval_only_records_have_no_answer_metrics():
    assert "answered" not in _metrics([_rec(1)])


def test_kiwix_question_is_a_hit_when_its_article_is_cited_even_below_the_top_k():
    cited = EvalRecord("k", "?", True, None, 1.0, (), kind="kiwix", check=_chk(gold_cited=True))
    ranked = EvalRecord("k", "?", True, 7, 1.0, (), kind="kiwix", check=_chk(gold_cited=False))
    m = _metrics([cited, ranked])
    assert m["hit@1"] == 0.5 and m["hit@5"] == 0.5 and m["hit@10"] == 1.0
    assert m["mrr@10"] == round((1 / 7) / 2, 4)  # MRR counts ranks only
    book = EvalRecord("b", "?", True, None, 1.0, (), check=_chk(gold_cited=True))
    assert _metrics([book])["hit@10"] == 0.0  # a cited book chunk is not a retrieval hit


def test_answer_containment_is_normalised_and_on_word_boundaries():
    assert _contains_answer(["The Colorado River."], ["It was built on the colorado   river, in 1931"])
    assert _contains_answer(["a pig"], ["", "it turned into a PIG!"])
    assert not _contains_answer(["pig"], ["a pigeon flew by"])
    assert _contains_answer([], ["anything"]) is None
    assert _contains_answer(["..."], ["anything"]) is None


def test_check_grounds_every_citation_and_cites_the_kiwix_gold():
    item = QAItem(
        "k", "Which river?", "", answers=("Colorado River",), gold_zim="wiki", gold_path="A/Hoover_Dam"
    )
    cites = (
        Citation("kiwix", zim="wiki", path="A/Hoover_Dam", title="Hoover Dam"),
        Citation("kiwix", zim="wiki", path="A/Gone", title="Gone"),
    )
    answer = Answer("Which river?", "See [1].", cites, "NOT_BOOK", ("kiwix",), 1)
    texts = {"A/Hoover_Dam": "The dam is on the Colorado River.", "A/Gone": None}
    check = _check(item, None, answer, 12.0, lambda c: texts[c.path])
    assert check.contained and check.gold_cited and not check.unsupported
    assert check.grounded is False  # one citation does not resolve
    assert check.cited == ("wiki/A/Hoover_Dam", "wiki/A/Gone")


def test_not_found_answer_is_unsupported():
    from folio.nodes.answering import NOT_FOUND

    item = QAItem("b", "?", "x.txt", answers=("x",))
    check = _check(
        item, None, Answer("?", f"{NOT_FOUND}\nSearched: x", (), "BOOK", ("book",), 3), 1.0, lambda c: ""
    )
    assert check.unsupported and check.grounded is None and check.contained is True  # "x" is in "Searched: x"


def test_kiwix_jsonl_lines_are_read_as_kiwix_questions(tmp_path):
    path = tmp_path / "k.jsonl"
    row = {
        "question": "Which river?",
        "answers": ["Colorado River"],
        "gold_zim": "wiki",
        "gold_path": "A/Hoover_Dam",
    }
    path.write_text(json.dumps(row) + "\n")
    (item,) = qa_items(str(path))
    assert item.kind == "kiwix" and (item.gold_zim, item.gold_path) == ("wiki", "A/Hoover_Dam")
