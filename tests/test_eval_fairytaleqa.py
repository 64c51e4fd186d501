"""`folio eval` on the real FairytaleQA questions, default config (800-token chunks, hybrid)."""

import json
import os
import subprocess
import sys

import pytest

from dataflows.evaluation import evaluate_file
from tests.conftest import QA, REPO_DIR

QUESTIONS = QA / "fairytaleqa/questions.csv"


@pytest.fixture(scope="module")
def runs(fairytale_library):
    return {mode: evaluate_file(QUESTIONS, library=fairytale_library, mode=mode) for mode in ("lexical", "semantic", "hybrid")}


def test_every_gold_passage_is_located(runs):
    assert runs["hybrid"]["n"] == 365
    assert runs["hybrid"]["located"] == 365


def test_hybrid_hit_at_5_is_at_least_0_93(runs):
    assert runs["hybrid"]["hit@5"] >= 0.93


def test_hybrid_beats_lexical_at_rank_1_and_in_mrr(runs):
    assert runs["hybrid"]["hit@1"] >= runs["lexical"]["hit@1"]
    assert runs["hybrid"]["mrr@10"] >= runs["lexical"]["mrr@10"]


def test_hybrid_beats_semantic_everywhere(runs):
    for metric in ("hit@1", "hit@5", "mrr@10"):
        assert runs["hybrid"][metric] > runs["semantic"][metric]


def test_cli_eval_prints_the_metrics_json(fairytale_library, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    out = subprocess.run(
        [sys.executable, "-m", "dataflows.cli", "eval", str(QUESTIONS), "--library", str(fairytale_library), "--json",
         "--mode", "lexical"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    metrics = json.loads(out.stdout)
    assert set(metrics) == {"n", "located", "hit@1", "hit@5", "hit@10", "mrr@10", "p50_ms", "p95_ms"}
    assert metrics["hit@10"] >= metrics["hit@5"] >= metrics["hit@1"] > 0.5
