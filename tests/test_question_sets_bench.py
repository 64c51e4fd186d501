"""The issue-27 harness (``bench/question_sets.py``): FairytaleQA's halves, which runs a set gets, the
figures by kind and the answer-by-answer comparison (no ingest, no model)."""

from __future__ import annotations

import csv

from bench.question_sets import BY_NAME, _by_kind, compare, fairytale_halves, plan, row_name
from folio.nodes.eval.metrics import qa_items
from tests.conftest import QA


def test_fairytaleqa_halves_alternate_the_stories_sorted_by_name(tmp_path, data_dir):
    halves = fairytale_halves(tmp_path, data_dir)
    with (QA / "fairytaleqa" / "stories.csv").open(encoding="utf-8", newline="") as f:
        stories = sorted(r["story"] for r in csv.DictReader(f))
    assert halves == {"dev": stories[0::2], "test": stories[1::2]}
    assert (len(halves["dev"]), len(halves["test"])) == (13, 13)
    sizes = {h: len(qa_items(str(tmp_path / "fairytaleqa" / h / "questions.csv"))) for h in halves}
    assert sizes == {"dev": 193, "test": 172}
    for half, names in halves.items():  # every question's sections are there
        items = qa_items(str(tmp_path / "fairytaleqa" / half / "questions.csv"))
        assert all(i.passages and i.qid.split("/")[0] in names for i in items)


def test_the_library_sets_run_as_asked_and_kiwix_always_with_the_zims():
    runs = plan(["books27_dev", "kiwix27_test", "library_questions"], "both")
    assert [row_name(qs, z) for qs, z in runs] == [
        "books27_dev",
        "kiwix27_test",
        "library_questions",
        "library_questions+zims",
    ]
    assert [row_name(qs, z) for qs, z in plan(["kiwix27_dev", "library27_dev"], "no")] == [
        "kiwix27_dev",
        "library27_dev",
    ]
    assert BY_NAME["fairytaleqa_test"].library == "fairy"


def _result(answer: str, in_text: bool) -> dict:
    checks = {"in_text": in_text, "first_gold": True, "refused": False, "type": "concrete"}
    return {
        "metrics": {"n": 1, "answer_in_text": float(in_text)},
        "in_text_by_kind": _by_kind({"q1": checks}),
        "answers": {"q1": {"question": "What did Hans get?", "answer": answer, **checks}},
    }


def test_two_dumps_compare_figure_by_figure_and_answer_by_answer():
    before = {"sets": {"books27_dev": _result("Give me my wages.", False)}}
    after = {"sets": {"books27_dev": _result("He gave him a lump of gold.", True)}}
    text = compare(before, after)
    assert "in text 0.0 -> 1.0" in text and "concrete 0.0 -> 1.0" in text
    assert "in_text False->True" in text and "before: Give me my wages." in text
    assert "lump of gold" not in compare(before, after, answers=False)
