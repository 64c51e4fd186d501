"""The Kiwix query dataflow end to end: both backends, the CLI, errors and the question set."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.bench import _kiwix_serve, kiwix_bench, load_questions, question_sets
from folio.dataflows.cli import build_parser, main
from folio.dataflows.config import load_config
from folio.dataflows.kiwix_query import kiwix_answer
from folio.nodes.core.types import FolioError
from tests.conftest import DATA_DIR, REPO_DIR, ZIMS
from tests.servers import dead_url, start_kiwix_serve

WIKI = "wikipedia_en_100_mini_2022-10"
RAY = "wikipedia_en_ray_charles_mini_2020-03"
TONE = "tonedear.com_en_2024-09"
QUESTION_ZIMS = (WIKI, RAY, TONE)
ALL_ZIMS = sorted(str(p) for p in ZIMS.glob("*.zim"))
QA_DIR = REPO_DIR / "tests" / "qa"
QUESTION_SETS = question_sets(QA_DIR)
QUESTIONS = QUESTION_SETS["dev"]
HELDOUT_QUESTIONS = QUESTION_SETS["heldout"]


@pytest.fixture(scope="module")
def kiwix_server() -> Iterator[Any]:
    server = start_kiwix_serve([ZIMS / f"{name}.zim" for name in QUESTION_ZIMS])
    try:
        yield server
    finally:
        server.stop()


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


# --- the question sets and the bench -----------------------------------------------------------------


@pytest.fixture(scope="module")
def bench() -> dict[str, Any]:
    """``kiwix_bench`` on the real data, computed once (a short latency run: 6 queries per backend)."""
    return kiwix_bench(DATA_DIR, QA_DIR, latency_queries=6)


@pytest.mark.parametrize("name", sorted(QUESTION_SETS))
def test_question_set_is_well_formed_and_answers_are_in_the_gold_articles(name: str) -> None:
    from folio.nodes.backends.zim import ZimBackend

    questions = load_questions(QUESTION_SETS[name])
    assert len(questions) >= (40 if name == "dev" else 30)
    assert {q["gold_zim"] for q in questions} == set(QUESTION_ZIMS)
    with ZimBackend([ZIMS / f"{zim}.zim" for zim in QUESTION_ZIMS]) as backend:
        for q in questions:
            text = backend.article(q["gold_zim"], q["gold_path"]).text.casefold()
            assert any(a.casefold() in text for a in q["answers"]), q["question"]


def test_held_out_questions_are_new_questions() -> None:
    dev = {q["question"].casefold() for q in load_questions(QUESTIONS)}
    held_out = load_questions(HELDOUT_QUESTIONS)
    assert not dev & {q["question"].casefold() for q in held_out}
    # most held-out questions ask about articles the development set never uses
    dev_gold = {(q["gold_zim"], q["gold_path"]) for q in load_questions(QUESTIONS)}
    fresh = [q for q in held_out if (q["gold_zim"], q["gold_path"]) not in dev_gold]
    assert len(fresh) >= 0.8 * len(held_out)


@pytest.mark.parametrize("name", sorted(QUESTION_SETS))
def test_the_engine_alone_fails_on_raw_questions(bench: dict[str, Any], name: str) -> None:
    assert bench["question_sets"][name]["engine_raw_right_zim"]["top1"] < 0.2


@pytest.mark.parametrize("name", sorted(QUESTION_SETS))
def test_exact_top1_with_all_zims_loaded_meets_the_target(bench: dict[str, Any], name: str) -> None:
    """The right ZIM is not given: every archive is loaded and the books are chosen from evidence.

    Exact means the gold archive and path (measured: dev 0.862, held-out 0.860).
    """
    metrics = bench["question_sets"][name]["pipeline_all_zims"]
    assert metrics["top1"] >= 0.80
    assert metrics["top5"] >= 0.90
    assert metrics["top1_equivalent"] >= metrics["top1"]


@pytest.mark.parametrize("name", sorted(QUESTION_SETS))
def test_pipeline_beats_the_stop_word_stripped_engine_with_the_right_zim(
    bench: dict[str, Any], name: str
) -> None:
    table = bench["question_sets"][name]
    assert table["pipeline_right_zim"]["top1"] >= 0.80
    assert table["pipeline_right_zim"]["top1"] > table["engine_stripped_right_zim"]["top1"] + 0.2
    assert table["pipeline_right_zim"]["top5"] >= table["engine_stripped_right_zim"]["top5"]


def test_bench_reports_latency_for_both_backends(bench: dict[str, Any]) -> None:
    assert bench["question_counts"] == {name: len(load_questions(p)) for name, p in QUESTION_SETS.items()}
    for backend in ("libzim", "http"):
        row = bench["latency"][backend]
        assert row["queries"] == 6, row
        assert 0 < row["p50_ms"] <= row["p95_ms"]


def test_bench_kiwix_serve_is_stopped_after_the_run() -> None:
    with _kiwix_serve([ZIMS / f"{TONE}.zim"]) as url:
        assert httpx.get(f"{url}/catalog/v2/entries", timeout=5).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/catalog/v2/entries", timeout=5)


# --- kiwix_answer ------------------------------------------------------------------------------------


def test_kiwix_answer_with_libzim_returns_scored_candidates_and_context(tmp_path: Path) -> None:
    result = kiwix_answer(
        "Which river was the Hoover Dam built on?", zim_paths=ALL_ZIMS, cache_dir=str(tmp_path)
    )
    assert result.search_terms == "river hoover dam built"
    assert result.selected_books[0] == WIKI
    top = result.candidates[0]
    assert top.candidate.path == "A/Hoover_Dam"
    assert top.score == pytest.approx(sum(p for _, p in top.breakdown))
    assert "Colorado River" in result.context.text
    assert result.errors == ()


def test_kiwix_answer_over_http_matches_libzim(kiwix_server: Any, tmp_path: Path) -> None:
    question = "What are the raccoon's most distinctive features?"
    http = kiwix_answer(question, kiwix_url=kiwix_server.url, cache_dir=str(tmp_path))
    local = kiwix_answer(
        question, zim_paths=[ZIMS / f"{n}.zim" for n in QUESTION_ZIMS], cache_dir=str(tmp_path)
    )
    assert http.candidates[0].candidate.path == local.candidates[0].candidate.path == "A/Raccoon"
    assert http.candidates[0].score == local.candidates[0].score
    assert "ringed tail" in http.context.text


def test_multi_book_context_has_book_headers_when_two_books_survive(tmp_path: Path) -> None:
    cfg = load_config(overrides={"multibook_threshold": 0.0, "fusion_max_chars_per_source": 400})
    result = kiwix_answer(
        "Which song by the Beatles did Ray Charles cover?",
        zim_paths=[ZIMS / f"{WIKI}.zim", ZIMS / f"{RAY}.zim"],
        config=cfg,
        cache_dir=str(tmp_path),
    )
    assert len(result.context.sections) == 2
    first, second = result.context.sections
    assert result.context.text.startswith(f"[{first.source} — {first.title}]\n{first.text}")
    assert f"\n\n[{second.source} — {second.title}]\n{second.text}" in result.context.text
    assert result.context.text.count("[") == 2  # one level of headers
    assert all(len(s.text.split()) <= 60 for s in result.context.sections)


def test_dead_server_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FolioError, match="cannot connect"):
        kiwix_answer("What is a kit?", kiwix_url=dead_url(), cache_dir=str(tmp_path))


def test_corrupt_zim_is_reported_and_the_other_book_answers(tmp_path: Path) -> None:
    broken = tmp_path / "corrupt.zim"
    broken.write_bytes(b"ZIM\x04" + b"\x00" * 100)
    result = kiwix_answer(
        "Where do emus live in the wild?", zim_paths=[broken, ZIMS / f"{WIKI}.zim"], cache_dir=str(tmp_path)
    )
    assert [src for src, _ in result.errors] == ["corrupt"]
    assert result.candidates[0].candidate.path == "A/Emu"


def test_no_source_given_is_a_folio_error() -> None:
    with pytest.raises(FolioError, match="no ZIM files"):
        kiwix_answer("anything")


# --- CLI -----------------------------------------------------------------------------------------------


def test_cli_prints_books_candidates_with_signals_and_context(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["kiwix", "Where do emus live in the wild?", "--zim", str(ZIMS / f"{WIKI}.zim")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"books searched: {WIKI}" in out
    assert f"selected books: {WIKI} (primary)" in out
    assert "Emu" in out and "stemmed_title=+15" in out and f"{WIKI} : A/Emu" in out
    assert f"\nanswer:\n  [{WIKI}] Emu (" in out and f"— zim://{WIKI}/A/Emu\n" in out
    answer = out.split(f"— zim://{WIKI}/A/Emu\n", 1)[1]
    assert "Australia" in answer  # "where": the passage that names the place


def test_cli_names_the_superseded_edition(capsys: pytest.CaptureFixture[str]) -> None:
    old = "wikipedia_en_ray_charles_novid_2018-10"
    args = parse(
        ["kiwix", "Who were the Raelettes?", "--zim", str(ZIMS / f"{RAY}.zim"), str(ZIMS / f"{old}.zim")]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"not searched: {old} (older edition of {RAY})" in out
    assert "The Raelettes" in out


def test_cli_json_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["kiwix", "What do termites feed on?", "--zim", *ALL_ZIMS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["candidates"][0]["path"] == "A/Termite"
    assert data["candidates"][0]["rank"] == 1 and data["candidates"][0]["excerpt"]
    assert data["primary_book"] == WIKI
    # the Ray Charles "mini" edition finds nothing about termites: its older edition is searched instead
    assert "wikipedia_en_ray_charles_novid_2018-10" in data["searched_books"]
    assert data["superseded_books"] == []
    assert data["candidates"][0]["score"] == pytest.approx(sum(data["candidates"][0]["breakdown"].values()))
    assert data["selected_books"][0] == WIKI
    assert "wood" in data["context"]


def test_cli_error_is_one_line_and_exit_status_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kiwix", "What is a kit?", "--kiwix-url", dead_url()]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot connect" in err


def test_cli_rejects_both_sources() -> None:
    with pytest.raises(SystemExit):
        parse(["kiwix", "q", "--zim", "a.zim", "--kiwix-url", "http://x"])
