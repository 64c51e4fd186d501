"""The results store of ``folio experiment``: DuckDB round trips, atomic saves, the table and the plot."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from folio.dataflows import experiment_store as store
from folio.nodes.core.types import FolioError

REPO_DIR = Path(__file__).resolve().parents[1]
T0 = datetime(2025, 1, 2, 10, 0, 0)


def _rows() -> list[dict[str, Any]]:
    return [
        {
            "question_file": "alice.json",
            "qid": "q1",
            "question": "Who is late?",
            "located": True,
            "rank": 1,
            "latency_ms": 12.5,
            "answer": "The White Rabbit",
            "contained": True,
            "grounded": True,
            "unsupported": False,
            "tool_calls": 2,
            "answer_latency_ms": 800.0,
            "cited": '["alice:3"]',
        },
        {
            "question_file": "alice.json",
            "qid": "q2",
            "question": "What does the cat do?",
            "located": False,
            "rank": None,
            "latency_ms": 9.0,
            "answer": None,
            "contained": None,
            "grounded": None,
            "unsupported": None,
            "tool_calls": None,
            "answer_latency_ms": None,
            "cited": None,
        },
        {"question_file": "grimm.json", "qid": "g1", "located": True, "rank": 3, "latency_ms": 7.25},
    ]


def _save(db: Path, batch: str, variant: str, *, started_at: datetime = T0, **kw: Any) -> str:
    args: dict[str, Any] = {
        "batch_id": batch,
        "experiment": "chunking",
        "variant": variant,
        "config": {"chunk_tokens": 256, "search_mode": "hybrid", "books": ["a.epub"]},
        "overrides": {"chunk_tokens": 256},
        "metrics": {
            "alice.json": {"n": 2, "hit@1": 0.5, "mrr@10": 0.625, "p50_ms": 10.75},
            "grimm.json": {"n": 1, "hit@1": 0.0, "mrr@10": None, "p50_ms": 7.25},
        },
        "results": _rows(),
        "cache": {"executed": 5, "from_cache": 7},
        "seconds": 3.5,
        "started_at": started_at,
    }
    args.update(kw)
    return store.save_run(db, **args)


def _counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db))
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "metrics", "results")
        }
    finally:
        con.close()


def test_round_trip_returns_runs_metrics_and_results_as_saved(tmp_path: Path) -> None:
    db = tmp_path / "lib" / "experiments.duckdb"
    a = _save(db, "b1", "chunk_tokens=256")
    b = _save(
        db,
        "b1",
        "baseline bm25s",
        config={"baseline": "bm25s"},
        overrides={},
        cache={"executed": 0, "from_cache": 0},
        started_at=T0 + timedelta(seconds=5),
    )
    assert a != b and re.fullmatch(r"[0-9a-f]{8}", a)

    runs = store.load_runs(db)
    assert [r["run_id"] for r in runs] == [a, b]
    first, second = runs
    assert first["batch_id"] == "b1" and first["experiment"] == "chunking"
    assert first["variant"] == "chunk_tokens=256" and second["variant"] == "baseline bm25s"
    assert first["config"] == {"chunk_tokens": 256, "search_mode": "hybrid", "books": ["a.epub"]}
    assert first["overrides"] == {"chunk_tokens": 256} and second["overrides"] == {}
    assert first["config_hash"] == store.config_hash(first["config"])
    assert first["cache_executed"] == 5 and first["cache_from_cache"] == 7
    assert second["cache_executed"] == 0
    assert first["seconds"] == 3.5 and first["started_at"] == T0
    assert first["metrics"] == {
        "alice.json": {"n": 2, "hit@1": 0.5, "mrr@10": 0.625, "p50_ms": 10.75},
        "grimm.json": {"n": 1, "hit@1": 0.0, "mrr@10": None, "p50_ms": 7.25},
    }
    assert list(first["metrics"]["alice.json"]) == ["n", "hit@1", "mrr@10", "p50_ms"]
    assert isinstance(first["metrics"]["alice.json"]["n"], int)
    assert isinstance(first["metrics"]["grimm.json"]["hit@1"], float)

    results = store.load_results(db, a)
    assert len(results) == 3
    for got, want in zip(results, _rows(), strict=True):
        assert got["run_id"] == a
        for col in store.RESULT_COLUMNS:
            assert got[col] == want.get(col), col
    assert results[0]["located"] is True and results[0]["unsupported"] is False
    assert results[1]["contained"] is None and results[1]["rank"] is None
    assert results[2]["answer"] is None and results[2]["question"] is None
    assert store.load_results(db, b) == [dict(r, run_id=b) for r in results]


def test_load_runs_selects_by_id_and_names_unknown_ids(tmp_path: Path) -> None:
    db = tmp_path / "experiments.duckdb"
    a = _save(db, "b1", "v1")
    b = _save(db, "b1", "v2")
    c = _save(db, "b2", "v3", started_at=T0 + timedelta(hours=1))
    assert [r["run_id"] for r in store.load_runs(db, run_ids=[c, a])] == [a, c]  # insertion order
    assert [r["run_id"] for r in store.load_runs(db, run_ids=[b])] == [b]
    assert [r["run_id"] for r in store.load_runs(db, batch_id="b1")] == [a, b]
    with pytest.raises(FolioError) as err:
        store.load_runs(db, run_ids=[a, "nope1", "nope2"])
    assert err.value.reason == "unknown run id(s): nope1, nope2"
    assert err.value.source == str(db)
    with pytest.raises(FolioError, match="unknown run id"):
        store.load_results(db, "nope1")
    with pytest.raises(FolioError, match="unknown batch id"):
        store.load_runs(db, batch_id="b9")


def test_load_runs_without_arguments_returns_the_latest_batch(tmp_path: Path) -> None:
    db = tmp_path / "experiments.duckdb"
    assert store.latest_batch(db) is None and store.load_runs(db) == []
    assert not db.exists()  # reading never creates the store
    _save(db, "old", "v1")
    assert store.latest_batch(db) == "old"
    later = [_save(db, "new", f"v{i}", started_at=T0 + timedelta(days=1, seconds=i)) for i in range(2)]
    assert store.latest_batch(db) == "new"
    assert [r["run_id"] for r in store.load_runs(db)] == later


def test_failed_save_leaves_no_rows_of_that_run(tmp_path: Path) -> None:
    db = tmp_path / "experiments.duckdb"
    kept = _save(db, "b1", "good")
    before = _counts(db)
    bad_rows = [*_rows(), {"question_file": "alice.json", "qid": "q9", "rank": "not a number"}]
    with pytest.raises(FolioError, match="cannot store run 'bad'"):
        _save(db, "b1", "bad", results=bad_rows)
    assert _counts(db) == before
    assert [r["variant"] for r in store.load_runs(db, batch_id="b1")] == ["good"]
    assert len(store.load_results(db, kept)) == 3
    # the store is still usable after the rollback
    _save(db, "b1", "after")
    assert [r["variant"] for r in store.load_runs(db)] == ["good", "after"]


def test_failed_save_rolls_back_when_interrupted_after_the_runs_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "experiments.duckdb"
    _save(db, "b1", "good")
    before = _counts(db)

    def boom(*_args: Any) -> tuple[Any, ...]:
        raise RuntimeError("interrupted")

    monkeypatch.setattr(store, "_result_row", boom)
    with pytest.raises(RuntimeError, match="interrupted"):
        _save(db, "b1", "bad")
    assert _counts(db) == before


def test_save_rejects_bad_input_with_folio_error(tmp_path: Path) -> None:
    db = tmp_path / "experiments.duckdb"
    with pytest.raises(FolioError, match="not a number"):
        _save(db, "b1", "v", metrics={"alice.json": {"hit@1": "high"}})
    with pytest.raises(FolioError, match="has no qid"):
        _save(db, "b1", "v", results=[{"question_file": "alice.json"}])
    with pytest.raises(FolioError, match="batch_id"):
        _save(db, "", "v")


def test_comparison_table_marks_best_values_and_formats_numbers() -> None:
    runs = [
        {
            "run_id": "aaaa",
            "variant": "lex",
            "cache_executed": 3,
            "cache_from_cache": 1,
            "seconds": 1.5,
            "metrics": {"q.json": {"hit@1": 0.5, "mrr@10": 0.4, "p50_ms": 12.0, "n": 4}},
        },
        {
            "run_id": "bbbb",
            "variant": "hybrid",
            "cache_executed": 0,
            "cache_from_cache": 4,
            "seconds": 0.5,
            "metrics": {"q.json": {"hit@1": 0.75, "mrr@10": None, "p50_ms": 20.5, "n": 4}},
        },
    ]
    assert store.comparison_table(runs).splitlines() == [
        "run_id  variant  question_file  hit@1   mrr@10   p50_ms   n   ingest_run/cached  seconds",
        "------  -------  -------------  ------  -------  -------  --  -----------------  -------",
        "aaaa    lex      q.json         0.500    0.400   12.000*  4                 3/1      1.5",
        "bbbb    hybrid   q.json         0.750*       -   20.500   4                 0/4      0.5",
        "* best per question file (lower is better for *_ms, unsupported, duplicate, fragment and "
        "short-line rates, higher for other rates)",
    ]
    only = store.comparison_table(runs, metrics=["unsupported_rate"]).splitlines()
    assert only[0].split() == [
        "run_id",
        "variant",
        "question_file",
        "unsupported_rate",
        "ingest_run/cached",
        "seconds",
    ]
    assert "*" not in "".join(only[2:])


def test_comparison_table_marks_best_per_question_file_and_lower_unsupported_rate() -> None:
    runs = [
        {
            "run_id": "r1",
            "variant": "a",
            "metrics": {"x": {"unsupported_rate": 0.2}, "y": {"unsupported_rate": 0.9}},
        },
        {
            "run_id": "r2",
            "variant": "b",
            "metrics": {"x": {"unsupported_rate": 0.4}, "y": {"unsupported_rate": 0.1}},
        },
    ]
    lines = store.comparison_table(runs).splitlines()[2:6]
    starred = [line.split()[:3] for line in lines if "*" in line]
    assert starred == [["r1", "a", "x"], ["r2", "b", "y"]]
    assert "-/-" in lines[0] and lines[0].endswith("-")


def test_plot_runs_writes_a_readable_png(tmp_path: Path) -> None:
    import matplotlib.image

    db = tmp_path / "experiments.duckdb"
    for i, variant in enumerate(["chunk_tokens=256", "chunk_tokens=512", "baseline bm25s"]):
        _save(db, "b1", variant, started_at=T0 + timedelta(seconds=i))
    out = store.plot_runs(store.load_runs(db), tmp_path / "plots" / "chunking.png")
    assert out == tmp_path / "plots" / "chunking.png"
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    image = matplotlib.image.imread(out)
    assert image.ndim == 3 and image.shape[1] > 0 and image.shape[0] > 0


def test_plot_runs_refuses_runs_without_the_metrics(tmp_path: Path) -> None:
    with pytest.raises(FolioError, match="none of the metrics"):
        store.plot_runs(
            [{"run_id": "r", "variant": "v", "metrics": {"x": {"p50_ms": 1.0}}}], tmp_path / "p.png"
        )


def test_git_commit_of_the_repo_and_of_a_plain_folder(tmp_path: Path) -> None:
    commit = store.git_commit(REPO_DIR)
    assert commit is not None and re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit)
    assert store.git_commit() == commit
    assert store.git_commit(tmp_path) is None
    assert store.git_commit(tmp_path / "missing") is None


def test_config_hash_is_short_and_ignores_key_order() -> None:
    h = store.config_hash({"a": 1, "b": [1, 2]})
    assert re.fullmatch(r"[0-9a-f]{12}", h)
    assert h == store.config_hash({"b": [1, 2], "a": 1})
    assert h != store.config_hash({"a": 2, "b": [1, 2]})


def test_strict_answer_metrics_are_marked_in_their_direction():
    assert store.is_rate("answer_in_text") and store.is_rate("first_citation_gold")
    assert store._direction("answer_in_text") == 1 and store._direction("first_citation_gold") == 1
    for name in ("duplicate_rate", "fragment_rate", "short_line_rate", "unsupported_rate"):
        assert store._direction(name) == -1
    assert store._direction("refusal_rate") == 0  # right off-library only: not marked
    assert store._direction("answer_words_p50") == 0
    runs = [
        {"run_id": "a", "variant": "x", "metrics": {"q": {"fragment_rate": 0.1, "answer_in_text": 0.3}}},
        {"run_id": "b", "variant": "y", "metrics": {"q": {"fragment_rate": 0.02, "answer_in_text": 0.4}}},
    ]
    rows = store.comparison_table(runs, ["fragment_rate", "answer_in_text"]).splitlines()
    assert rows[2].split()[3:5] == ["0.100", "0.300"] and rows[3].split()[3:5] == ["0.020*", "0.400*"]
