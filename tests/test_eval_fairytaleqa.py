"""`folio eval` on the real FairytaleQA questions, default config (800-token chunks, hybrid)."""

import json
import os
import subprocess
import sys

import pytest

from folio.dataflows.evaluation import evaluate_file
from tests.conftest import QA, REPO_DIR

QUESTIONS = QA / "fairytaleqa/questions.csv"


@pytest.fixture(scope="module")
def runs(fairytale_library):
    return {
        mode: evaluate_file(QUESTIONS, library=fairytale_library, mode=mode, answers=mode == "hybrid")
        for mode in ("lexical", "semantic", "hybrid")
    }


def test_every_gold_passage_is_located(runs):
    assert runs["hybrid"]["n"] == 365
    assert runs["hybrid"]["located"] == 365


def test_hybrid_hit_at_5_is_at_least_0_93(runs):
    assert runs["hybrid"]["hit@5"] >= 0.93


def test_hybrid_beats_lexical_at_rank_1_and_in_mrr(runs):
    assert runs["hybrid"]["hit@1"] >= runs["lexical"]["hit@1"]
    assert runs["hybrid"]["mrr@10"] >= runs["lexical"]["mrr@10"]


def test_default_answers_cite_the_gold_passage_and_every_citation_resolves(runs):
    hybrid = runs["hybrid"]
    assert hybrid["answered"] == 365
    assert hybrid["grounded_rate"] == 1.0
    # the evidence rule refuses vague or misspelt questions whose best passage reads unlike them
    # (similarity under 0.44; calibrated on tests/qa/library_questions.jsonl): measured 0.044 unsupported
    # (0.008 with the earlier rule, which answered 78% of off-library questions with filler). The reader
    # cites one or two passages, not five chunks: measured 0.745 gold cited by any citation (0.929 when
    # answers cited five whole chunks), 0.367 answer in text at 52 words (0.279 at 106), first citation
    # in the gold 0.603, no duplicated sentence, no line starting mid-sentence.
    assert hybrid["gold_cited_rate"] >= 0.70
    assert hybrid["unsupported_rate"] <= 0.05
    assert hybrid["answer_in_text"] >= 0.34 and hybrid["answer_words_p50"] <= 60
    assert hybrid["first_citation_gold"] >= 0.55
    assert hybrid["duplicate_rate"] == 0.0 and hybrid["fragment_rate"] <= 0.02
    assert "answered" not in runs["lexical"]  # answers=False: retrieval only
    cited = [d for d in hybrid["details"] if d["cited"] and d["cited"] != "[]"]
    assert len(cited) >= 345


def test_hybrid_beats_semantic_everywhere(runs):
    for metric in ("hit@1", "hit@5", "mrr@10"):
        assert runs["hybrid"][metric] > runs["semantic"][metric]


def test_cli_eval_prints_the_metrics_json(fairytale_library, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "folio.dataflows.cli",
            "eval",
            str(QUESTIONS),
            "--library",
            str(fairytale_library),
            "--json",
            "--mode",
            "lexical",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    metrics = json.loads(out.stdout)
    retrieval = {"n", "located", "hit@1", "hit@5", "hit@10", "mrr@10", "p50_ms", "p95_ms"}
    answers = {
        "answered",
        "answer_contained_rate",
        "grounded_rate",
        "unsupported_rate",
        "gold_cited_rate",
        "tool_calls_mean",
        "answer_p50_ms",
        "answer_p95_ms",
    }
    strict = {
        "answer_in_text",
        "answer_words_p50",
        "first_citation_gold",
        "duplicate_rate",
        "fragment_rate",
        "short_line_rate",
    }
    ask = {"ask_hit@1", "ask_hit@3", "ask_vs_search@1"}  # where the reader reads (issue 27)
    assert set(metrics) == retrieval | answers | strict | ask
    assert metrics["hit@10"] >= metrics["hit@5"] >= metrics["hit@1"] > 0.5
    assert metrics["ask_hit@3"] >= metrics["ask_hit@1"] > 0
    assert (
        metrics["ask_vs_search@1"] == round(metrics["ask_hit@1"] - metrics["hit@1"], 4)
        or abs(metrics["ask_vs_search@1"] - (metrics["ask_hit@1"] - metrics["hit@1"])) < 1e-3
    )


def test_cli_eval_prints_the_refusal_and_answered_rates_of_library_questions(
    fairytale_library, tmp_path, capsys
):
    from folio.dataflows.cli import main

    rows = [
        {"question": "Who is Count Dracula?", "expect": "refuse"},
        {"question": "How does photosynthesis turn sunlight into sugar?", "expect": "refuse"},
        {"question": "Who was the chief mate of the Pequod?", "expect": "refuse"},  # Moby-Dick is not here
        {
            "question": "What did Peter's mother give him when he was ill?",
            "expect": "answer",
            "answers": ["camomile tea"],
        },
        {
            "question": "What did the Queen put under the mattresses to test the princess?",
            "expect": "answer",
            "answers": ["pea"],
        },
    ]
    path = tmp_path / "library.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["eval", str(path), "--library", str(fairytale_library)]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines() if line.strip())
    assert float(lines["refusal_rate"]) == 1.0 and float(lines["answered_rate"]) == 1.0
    assert float(lines["answer_in_text"]) == 1.0  # both accepted answers are in the answer text
    assert lines["located"].strip() == "0"  # no gold passages: retrieval is not measured
