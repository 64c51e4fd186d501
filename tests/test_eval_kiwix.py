"""The evaluation DAG on Kiwix questions: real ZIMs, the Kiwix pipeline and the query DAG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.dataflows.cli import main
from folio.dataflows.evaluation import evaluate

QUESTIONS = Path(__file__).parent / "qa" / "kiwix_questions.jsonl"


@pytest.fixture(scope="module")
def kiwix_run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("kiwix-eval")
    subset = root / "kiwix12.jsonl"
    subset.write_text(
        "\n".join(QUESTIONS.read_text(encoding="utf-8").splitlines()[:12]) + "\n", encoding="utf-8"
    )
    zims = sorted(str(p) for p in (data_dir / "zim").glob("*.zim"))
    cfg = {"kiwix": "libzim", "zim_paths": zims}
    return subset, zims, evaluate(subset, root / "library", cfg)


def test_kiwix_questions_are_retrieved_answered_and_grounded(kiwix_run):
    _, _, run = kiwix_run
    m = run.metrics
    assert m["n"] == m["located"] == m["answered"] == 12
    assert m["hit@5"] >= 0.8 and m["hit@1"] >= 0.7
    assert m["grounded_rate"] == 1.0  # every cited article opens and has text
    assert m["answer_contained_rate"] >= 0.6
    assert all(r.kind == "kiwix" for r in run.records)


def test_kiwix_rank_is_the_gold_articles_position_among_candidates(kiwix_run):
    subset, _, run = kiwix_run
    golds = [json.loads(line) for line in subset.read_text(encoding="utf-8").splitlines()]
    for record, gold in zip(run.records, golds, strict=True):
        keys = [entry for entry, _, _ in record.top]
        if record.rank is not None and record.rank <= 10:
            assert keys[record.rank - 1] == f"{gold['gold_zim']}/{gold['gold_path']}"
        assert record.check is not None
        if record.check.gold_cited:
            assert f"{gold['gold_zim']}/{gold['gold_path']}" in record.check.cited


def test_cli_eval_reads_zims_from_a_config_and_skips_answers(kiwix_run, tmp_path, capsys):
    subset, zims, _ = kiwix_run
    config = tmp_path / "kiwix.yaml"
    config.write_text("kiwix: libzim\nzim_paths:\n" + "".join(f"  - {z}\n" for z in zims), encoding="utf-8")
    code = main(
        [
            "eval",
            str(subset),
            "--library",
            str(tmp_path / "lib"),
            "--config",
            str(config),
            "--no-answers",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 12 and "answered" not in out and out["hit@5"] >= 0.8
