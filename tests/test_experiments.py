"""folio experiment: experiment files, variant libraries over the shared cache, DuckDB results, plots."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from folio.dataflows import experiment_store
from folio.dataflows.cli import main
from folio.dataflows.config import CONFIG_DIR, load_config
from folio.dataflows.experiments import (
    Variant,
    ingest_hash,
    ingest_keys,
    load_experiment,
    run_experiment,
    variant_config,
)
from folio.dataflows.registry import driver_for, ingest_driver, search_driver
from folio.nodes.core.types import FolioError

QA_DIR = Path(__file__).parent / "qa"
EXPERIMENTS = sorted((CONFIG_DIR / "experiments").glob("*.yaml"))
# An experiment over a switch that another branch of issue 27 adds (the rerank stage): its variants are
# built once the config knows the switch; until then only its file is checked (test below).
PENDING_SWITCH = {"rerank.yaml": "rerank"}


def _switch_ready(path: Path) -> bool:
    key = PENDING_SWITCH.get(path.name)
    return key is None or key in load_config(None, environ={})


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_example_experiments_exist_and_every_variant_builds_its_drivers():
    assert {p.name for p in EXPERIMENTS} >= {"fairytaleqa-chunking.yaml", "kiwix-multibook.yaml"}
    for path in filter(_switch_ready, EXPERIMENTS):
        experiment = load_experiment(path)
        for variant in experiment.variants:
            cfg = variant_config(experiment, variant)
            assert ingest_driver(cfg) is not None
            assert search_driver(cfg) is not None
            assert driver_for("eval", cfg).list_available_variables()


def test_grid_expands_to_every_combination_then_the_baselines():
    experiment = load_experiment(CONFIG_DIR / "experiments" / "fairytaleqa-chunking.yaml")
    labels = [v.label for v in experiment.variants]
    assert len(labels) == 3 * 3 + 2
    assert labels[0] == "chunk_tokens=256 search_mode=lexical"
    assert labels[-2:] == ["baseline bm25s", "baseline dense_exact"]
    bm25 = experiment.variants[-2]
    assert bm25.overrides == {"workers": 1, "search_mode": "bm25s", "eval_answers": False}
    assert all(v.overrides["workers"] == 1 for v in experiment.variants)


def test_unknown_config_key_in_a_variant_names_the_file_and_variant(tmp_path):
    path = _write(
        tmp_path / "x.yaml",
        f"grid: {{chunk_tokenz: [256]}}\nquestions: [{QA_DIR / 'alice_questions.jsonl'}]\n",
    )
    with pytest.raises(FolioError, match=r"x\.yaml.*chunk_tokenz=256.*unknown config key"):
        load_experiment(path)


def test_unknown_experiment_key_and_missing_questions_are_one_line_errors(tmp_path):
    with pytest.raises(FolioError, match="unknown experiment key"):
        load_experiment(_write(tmp_path / "a.yaml", "grids: {}\n"))
    with pytest.raises(FolioError, match="questions path not found"):
        load_experiment(_write(tmp_path / "b.yaml", "questions: [nope.jsonl]\n"))
    with pytest.raises(FolioError, match="no question files"):
        load_experiment(_write(tmp_path / "c.yaml", "grid: {search_mode: [lexical]}\n"))


def test_ingest_keys_come_from_the_ingest_graph():
    cfg = variant_config(load_experiment(EXPERIMENTS[0]), Variant("base", {}))
    keys = set(ingest_keys(cfg))
    assert {"chunk_tokens", "chunk_overlap", "embedding_model", "embedder", "window_tokens"} <= keys
    assert not keys & {
        "search_mode",
        "multibook_threshold",
        "hybrid_lexical_weight",
        "workers",
        "eval_answers",
    }


def test_search_only_overrides_share_one_variant_library_and_ingest_overrides_do_not():
    experiment = load_experiment(CONFIG_DIR / "experiments" / "fairytaleqa-chunking.yaml")
    by_label = {v.label: ingest_hash(variant_config(experiment, v)) for v in experiment.variants}
    assert by_label["chunk_tokens=256 search_mode=lexical"] == by_label["chunk_tokens=256 search_mode=hybrid"]
    assert (
        by_label["chunk_tokens=256 search_mode=lexical"] != by_label["chunk_tokens=512 search_mode=lexical"]
    )


# --- a real two-variant experiment (small Alice book, 5 questions) ----------------------------------


@pytest.fixture(scope="module")
def alice_experiment(tmp_path_factory, alice_library, data_dir):
    """Two variants over the Alice book at chunk_tokens 256 (not the library's 800): lexical, then hybrid."""
    root = tmp_path_factory.mktemp("experiment")
    library = root / "library"
    shutil.copytree(alice_library, library)
    path = _write(
        root / "alice.yaml",
        "name: alice-two-variants\n"
        "overrides: {chunk_tokens: 256, workers: 1}\n"
        "grid: {search_mode: [lexical, hybrid]}\n"
        "baselines: [bm25s]\n"
        f"questions: [{QA_DIR / 'alice_questions.jsonl'}]\n"
        f"books: [{data_dir / 'books/epub/carroll_alice-in-wonderland_abridged-pg19033.epub'}]\n",
    )
    report = run_experiment(path, library)
    return path, library, report


def test_second_variant_reuses_the_cached_ingest(alice_experiment):
    _, _, report = alice_experiment
    first, second, baseline = report.runs
    assert first["variant"] == "search_mode=lexical"
    # the first variant re-chunked and re-embedded at 256 tokens (parse-level nodes came from the cache)
    assert first["cache_executed"] > second["cache_executed"]
    assert second["cache_from_cache"] > first["cache_from_cache"]
    # the second only changes search: everything but the always-recomputed writers came from the cache
    assert second["cache_from_cache"] >= 6
    assert second["cache_executed"] <= first["cache_executed"] - 3
    assert (
        baseline["variant"] == "baseline bm25s" and baseline["cache_from_cache"] == second["cache_from_cache"]
    )


def test_variant_nodes_reused_are_the_expensive_ones(alice_experiment, data_dir):
    """Run the ingest once more: with a warm cache, chunking and embedding come from it."""
    from folio.dataflows.experiments import variant_library
    from folio.dataflows.library import Library

    path, library, _ = alice_experiment
    experiment = load_experiment(path)
    cfg = variant_config(experiment, experiment.variants[1])
    vlib, counts = variant_library(Library(library), cfg, list(experiment.books))
    assert vlib.path.parent == Path(library) / "experiments" / "libraries"
    assert counts["from_cache"] >= 6 and counts["executed"] >= 1
    assert [b["chunk_tokens"] for b in vlib.books()] == [256]


def test_results_round_trip_through_duckdb(alice_experiment):
    _, library, report = alice_experiment
    db = Path(library) / "experiments.duckdb"
    assert report.db_path == db
    runs = experiment_store.load_runs(db)
    assert [r["run_id"] for r in runs] == [r["run_id"] for r in report.runs]
    lexical, _hybrid, bm25 = runs
    assert lexical["overrides"] == {"chunk_tokens": 256, "workers": 1, "search_mode": "lexical"}
    assert lexical["config"]["chunk_tokens"] == 256 and lexical["config"]["search_mode"] == "lexical"
    assert lexical["config_hash"] == experiment_store.config_hash(lexical["config"])
    metrics = lexical["metrics"]["alice_questions.jsonl"]
    assert metrics["n"] == 5 and metrics["located"] == 5
    rows = experiment_store.load_results(db, lexical["run_id"])
    assert len(rows) == 5 and {r["qid"] for r in rows} == {f"alice-0{i}" for i in range(1, 6)}
    hit5 = sum(1 for r in rows if r["rank"] is not None and r["rank"] <= 5) / 5
    assert hit5 == pytest.approx(metrics["hit@5"])
    assert all(isinstance(r["contained"], bool) for r in rows)  # answers were checked
    assert all(r["contained"] is None for r in experiment_store.load_results(db, bm25["run_id"]))
    assert "answer_contained_rate" not in bm25["metrics"]["alice_questions.jsonl"]


def test_alice_variants_find_most_gold_quotes(alice_experiment):
    _, _, report = alice_experiment
    for run in report.runs:
        assert run["metrics"]["alice_questions.jsonl"]["hit@5"] >= 0.8, run["variant"]


def test_cli_show_prints_the_comparison_and_plots_a_png(alice_experiment, tmp_path, capsys):
    _, library, report = alice_experiment
    png = tmp_path / "plot.png"
    assert main(["experiment", "show", "--library", str(library), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for run in report.runs:
        assert run["run_id"] in out and run["variant"] in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["experiment", "show", report.runs[0]["run_id"], "--library", str(library), "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["variant"] == "search_mode=lexical"


def test_cli_show_without_experiments_is_a_one_line_error(tmp_path, capsys):
    assert main(["experiment", "show", "--library", str(tmp_path)]) == 1
    assert "no experiments yet" in capsys.readouterr().err


def test_every_public_export_resolves():
    from folio import dataflows

    for name in dataflows.__all__:
        assert getattr(dataflows, name) is not None, name
    assert dataflows.run_experiment is run_experiment


def test_questions_naming_a_book_outside_books_is_a_one_line_error(tmp_path, data_dir):
    from folio.dataflows.experiments import _book_sources
    from folio.dataflows.library import Library

    path = _write(
        tmp_path / "x.yaml",
        f"questions: [{QA_DIR / 'alice_questions.jsonl'}]\n"
        f"books: [{data_dir / 'books/txt/pg35_wells_the-time-machine.txt'}]\n",
    )
    with pytest.raises(
        FolioError, match=r"not under books: carroll_alice-in-wonderland_abridged-pg19033\.epub"
    ):
        _book_sources(load_experiment(path), Library(tmp_path / "lib"))


# --- a sample of each question file (the LLM experiment) ---------------------------------------------


def test_the_llm_experiment_compares_no_llm_with_an_llm_server_on_60_questions():
    experiment = load_experiment(CONFIG_DIR / "experiments" / "fairytaleqa-llm.yaml")
    assert [v.label for v in experiment.variants] == ["llm=none", "llm=openai"]
    assert experiment.sample == 60
    configs = [variant_config(experiment, v) for v in experiment.variants]
    assert [c["llm"] for c in configs] == ["none", "openai"]
    assert configs[1]["llm_model"] == "smollm2-135m"
    assert ingest_hash(configs[0]) == ingest_hash(configs[1])  # one ingest serves both variants


@pytest.mark.parametrize("sample", ["60", 0, -3, True, 2.5])
def test_a_sample_that_is_not_a_positive_count_is_a_one_line_error(tmp_path, sample):
    path = _write(
        tmp_path / "s.yaml",
        f"sample: {json.dumps(sample)}\nquestions: [{QA_DIR / 'alice_questions.jsonl'}]\n",
    )
    with pytest.raises(FolioError, match="sample must be a positive number of questions"):
        load_experiment(path)


def test_spread_takes_questions_evenly_over_the_file_in_order():
    from folio.dataflows.evaluation import spread

    picked = spread(range(365), 60)
    assert len(picked) == 60 and picked[0] == 0 and picked[-1] >= 365 - 365 // 60 - 1
    assert list(picked) == sorted(set(picked))
    gaps = {b - a for a, b in itertools.pairwise(picked)}
    assert gaps <= {6, 7}
    assert spread("abc", None) == ("a", "b", "c") and spread("abc", 9) == ("a", "b", "c")


def test_a_sampled_evaluation_asks_only_the_sampled_questions(alice_library):
    from folio.dataflows.evaluation import evaluate

    run = evaluate(QA_DIR / "alice_questions.jsonl", alice_library, {"eval_answers": False}, sample=2)
    assert run.metrics["n"] == 2
    assert [r.qid for r in run.records] == ["alice-01", "alice-03"]


def test_rerank_grid_names_the_three_stages_and_question_files_that_exist():
    import yaml

    path = CONFIG_DIR / "experiments" / "rerank.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert [v["rerank"] for v in data["variants"]] == ["none", "cross_encoder", "llm"]
    for rel in [*data["questions"], *data["books"], *data["overrides"]["zim_paths"]]:
        assert (path.parent / rel).resolve().is_file(), rel
    assert {"ask_hit@1", "ask_hit@3", "ask_vs_search@1"} <= set(data["metrics"])
