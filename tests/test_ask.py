"""``folio ask`` end to end: gold passages cited without an LLM, Kiwix and slow sources, CLI, drivers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from folio.dataflows.asking import ask, ask_config, ask_driver
from folio.dataflows.cli import main
from folio.dataflows.config import load_config
from folio.dataflows.library import Library
from folio.nodes.backends.book_tools import Session
from folio.nodes.core.gold import BookAligner, locate
from folio.nodes.core.types import NO_RESULTS, FolioError, SourceResult
from folio.nodes.eval.metrics import _is_hit, qa_items
from tests.conftest import QA, REPO_DIR, ZIMS

MOBY_QUESTIONS = REPO_DIR / "tests" / "qa" / "moby_dick_questions.jsonl"
WIKI = ZIMS / "wikipedia_en_100_mini_2022-10.zim"


def cited_gold_rate(library: Path, qa_file: Path, stride: int = 1) -> tuple[float, int]:
    """Share of located questions whose answer cites a chunk covering the gold passage (or quote)."""
    lib = Library(library)
    stores = {Path(b["source_file"]).name: lib.store(b["book_id"]) for b in lib.descriptors()}
    aligners: dict[str, BookAligner] = {}
    hits = located = 0
    for item in qa_items(str(qa_file))[::stride]:
        store = stores[Path(item.book_file).name]
        if item.passages and store.book_id not in aligners:
            aligners[store.book_id] = BookAligner(store)
        gold = locate(item, store, aligners.get(store.book_id))
        if gold is None:
            continue
        located += 1
        answer = ask(item.question, library=lib, config={"llm": "none"})
        cited = [lib.store(c.book_id).chunk(c.chunk_id) for c in answer.citations if c.kind == "book"]
        hits += any(_is_hit(h, gold) for h in cited)
    return hits / max(1, located), located


def test_fairytaleqa_answers_cite_the_gold_passage(fairytale_library: Path) -> None:
    # every eighth question (every third took 128 s of the suite, every fourth 92 located questions and
    # about 96 s: the suite ran 31 min 50 s on 2026-12-07, over its 30-minute line); the harness and
    # `folio eval` measure every question
    rate, located = cited_gold_rate(fairytale_library, QA / "fairytaleqa" / "questions.csv", stride=8)
    assert located >= 44
    assert rate >= 0.6, rate


def test_moby_dick_answers_cite_the_gold_quote(moby_library: Path) -> None:
    rate, located = cited_gold_rate(moby_library, MOBY_QUESTIONS)
    assert located == 20
    assert rate >= 0.6, rate


def test_moby_dick_question_file_is_well_formed() -> None:
    rows = [json.loads(line) for line in MOBY_QUESTIONS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 20 and len({r["question"] for r in rows}) == 20
    for r in rows:
        assert set(r) >= {"question", "book_file", "gold_quote", "gold_chapter", "answers"}
        assert r["book_file"] == "books/epub/melville_moby-dick.epub" and r["answers"]


def test_not_book_question_is_answered_from_kiwix_with_zim_citations(fairytale_library: Path) -> None:
    answer = ask("What is a noble gas?", library=fairytale_library, zim_paths=[WIKI], config={"llm": "none"})
    assert answer.route == "NOT_BOOK" and answer.sources_used == ("kiwix",)
    cited = answer.citations[0].as_dict()
    quote = cited.pop("quote")
    assert cited == {
        "zim": WIKI.stem,
        "path": "A/Noble_gas",
        "title": "Noble gas",
        "section": "",
        "url": f"zim://{WIKI.stem}/A/Noble_gas",
    }
    assert "noble gas" in quote.lower() and quote in answer.answer  # the passage the answer reads


def test_slow_source_is_abandoned_within_the_timeout(fairytale_library: Path) -> None:
    def slow(clause: str) -> SourceResult:
        time.sleep(3.0)
        return SourceResult("web", "web", "late")

    fast = (SourceResult("kiwix", "Neon", "Neon is a noble gas with atomic number ten."),)
    kiwix = {"kiwix_ready": True, "kiwix_results": fast}

    ask("What is neon?", library=fairytale_library, config={"llm": "none"}, overrides=kiwix)  # warm
    t0 = time.monotonic()
    answer = ask(
        "What is the atomic number of neon?",
        library=fairytale_library,
        overrides={**kiwix, "web_sources": {"web": slow}},
        config={"llm": "none", "fusion_timeout_seconds": 1.0},
    )
    assert time.monotonic() - t0 < 1.0 + 0.5
    assert answer.answer == "Neon is a noble gas with atomic number ten."
    assert "web: timed out after 1 s" in answer.notes


def test_compound_question_goes_to_book_and_kiwix(fairytale_library: Path) -> None:
    answer = ask(
        "Who made camomile tea when Peter was put to bed and what is a noble gas?",
        library=fairytale_library,
        zim_paths=[WIKI],
        config={"llm": "none"},
    )
    assert answer.route == "MIXED" and answer.sources_used == ("book", "kiwix")
    assert answer.answer.startswith("[BOOK — The Great Big Treasury of Beatrix Potter]")
    assert "\n\n---\n\n[KIWIX — Noble gas]\n" in answer.answer
    assert {c.kind for c in answer.citations} == {"book", "kiwix"}


def test_nothing_found_anywhere_says_what_was_searched_where(fairytale_library: Path) -> None:
    empty = {
        "kiwix_ready": True,
        "kiwix_results": (SourceResult("kiwix", "wikipedia_en_100_mini", "No results found", clause="neon"),),
    }
    answer = ask(
        "What is the atomic number of neon?",
        library=fairytale_library,
        overrides=empty,
        config={"llm": "none"},
    )
    lines = answer.answer.splitlines()
    assert lines[:2] == [NO_RESULTS, "Searched:"] and answer.citations == ()
    assert lines[2:] == ["- kiwix (wikipedia_en_100_mini) for 'neon': No results found"]
    assert "fusion query" not in answer.answer


def test_session_caches_across_questions(fairytale_library: Path) -> None:
    session = Session()
    first = ask(
        "Who made camomile tea for Peter?", library=fairytale_library, session=session, config={"llm": "none"}
    )
    again = ask(
        "Who made camomile tea for Peter?", library=fairytale_library, session=session, config={"llm": "none"}
    )
    assert again.citations == first.citations and session.hits >= 3


def test_cli_prints_the_json_answer(fairytale_library: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["ask", "Who made camomile tea for Peter?", "--library", str(fairytale_library), "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"answer", "citations", "route", "sources_used", "tool_calls", "notes"}
    citation = out["citations"][0]
    assert set(citation) == {
        "book_id",
        "book_title",
        "chapter_id",
        "chapter_title",
        "chunk_id",
        "start",
        "end",
        "quote",
        "page",
        "percent",
    }
    chapter = Library(fairytale_library).store(citation["book_id"]).chapter_text(citation["chapter_id"])
    assert citation["quote"] == " ".join(chapter[citation["start"] : citation["end"]].split())
    assert out["tool_calls"] <= 8


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Ahab?", "--library", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nothing to ask" in err


def test_agent_mode_without_llm_is_refused() -> None:
    with pytest.raises(FolioError, match="agent mode needs an LLM"):
        ask_config({"answer_mode": "agent", "llm": "none"})


@pytest.mark.parametrize(
    "overrides",
    [
        {"llm": "none"},
        {"llm": "openai"},
        {"llm": "openai", "answer_mode": "agent"},
        {"llm": "none", "kiwix": "http"},
        {"llm": "none", "answer_summaries": True},
    ],
)
def test_query_driver_builds_for_every_variant(overrides: dict) -> None:
    dr = ask_driver(load_config(None, overrides=overrides))
    names = {v.name for v in dr.list_available_variables()}
    assert {"routes", "book_results", "fused_context", "answer"} <= names


def test_agent_config_file_is_valid() -> None:
    cfg = ask_config(REPO_DIR / "configs" / "agent.yaml")
    assert (cfg["answer_mode"], cfg["llm"]) == ("agent", "openai")


def test_ask_against_trickling_servers_returns_within_its_deadline_and_the_process_exits(
    tmp_path: Path,
) -> None:
    """`folio ask` (the CLI's main, in a fresh process, warmed once on a dead URL so imports and driver
    build are not timed) with a kiwix-serve and a SearXNG that trickle one header byte every 0.1 s."""
    import os
    import subprocess
    import sys

    from tests.servers import TricklingHTTPServer, dead_url

    deadline = 3.0
    code = (
        "import sys, time; from folio.dataflows.cli import main\n"
        "question, lib, dead, slow = sys.argv[1:]\n"
        "main(['ask', question, '--library', lib, '--kiwix-url', dead])\n"
        "started = time.monotonic(); rc = main(['ask', question, '--library', lib, '--kiwix-url', slow])\n"
        "print(f'ASK {time.monotonic() - started:.2f} {time.monotonic():.3f}', flush=True); sys.exit(rc)\n"
    )
    with TricklingHTTPServer(interval=0.1, gives_up_after=90.0) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_DIR),
            "FOLIO_ASK_DEADLINE_SECONDS": str(deadline),
            "FOLIO_SEARCH_MODE": "lexical",  # no model: the library is empty
            "FOLIO_SEARXNG_URL": server.url,
        }
        question, library = "Why did the Beatles stop touring?", str(tmp_path / "lib")
        out = subprocess.run(
            [sys.executable, "-c", code, question, library, dead_url(), server.url],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
        )
        exited = time.monotonic()
    assert out.returncode == 0, out.stderr
    seconds, printed = (float(v) for v in out.stdout.rsplit("ASK ", 1)[1].split())
    assert seconds < deadline + 1.0
    # no worker thread holds the interpreter (a blocked one would for the server's 90 s); the margin is
    # the interpreter's own teardown, measured at 1-5 s on the shared 2-core machine
    assert exited - printed < 30.0
    assert f"kiwix: {server.url}/catalog" in out.stdout and "(timeout)" in out.stdout


def test_ask_answers_from_the_good_zim_beside_a_damaged_one_with_a_note(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.test_backends_zim import RC_MINI, _damaged_zim

    damaged = _damaged_zim(tmp_path, "damaged", "start")
    question, good = "Who was Ray Charles?", str(ZIMS / f"{RC_MINI}.zim")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_DIR),
        "FOLIO_SEARCH_MODE": "lexical",
    }  # empty library: no model
    args = ["ask", question, "--library", str(tmp_path / "lib"), "--zim", str(damaged), good]
    out = subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    assert f"zim://{RC_MINI}/A/Ray_Charles" in out.stdout
    assert "note: kiwix: damaged: damaged ZIM archive (Data corruption detected)" in out.stdout
