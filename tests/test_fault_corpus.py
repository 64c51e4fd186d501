"""The fault corpus's cheap cases (tests/fault_corpus.py: those that load no model), one test each: the
real ``folio`` command in a fresh process against generated damage, hostile input and misbehaving
servers; ``make faults`` runs every case."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fault_corpus import CASES, Case, Shared, corpus_root, outcome_problems, run_case
from tests.fault_corpus import Run as CorpusRun

FAST = [c for c in CASES if c.cheap]


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    with corpus_root() as root:
        yield Shared(root)


@pytest.mark.parametrize("fault", FAST, ids=[c.key for c in FAST])
def test_the_fault_is_handled(fault: Case, shared: Shared) -> None:
    result = run_case(fault, shared)
    if result.skipped:
        pytest.skip(result.skipped)
    assert result.passed, f"{result.key}: {result.problems} (exit {result.returncode}) {result.stderr}"


def test_the_checks_catch_a_traceback_an_internal_error_and_a_second_line() -> None:
    run = CorpusRun(["books"], ("error",), names=("library.sqlite",))
    assert outcome_problems(run, 1, "", "folio: /l/library.sqlite: damaged\n") == []
    assert outcome_problems(run, 1, "", 'Traceback (most recent call last):\n  File "x"\n') != []
    assert outcome_problems(run, 1, "", "folio: internal error: KeyError: 'x'\n") != []
    assert outcome_problems(run, 1, "", "folio: /l/library.sqlite: damaged\nmore\n") != []
    assert outcome_problems(run, 0, "", "folio: /l/library.sqlite: damaged\n") != []
    assert outcome_problems(run, 1, "", "folio: something else\n") != []


def test_the_checks_want_a_note_for_a_degraded_answer_and_130_for_an_interrupt() -> None:
    degraded = CorpusRun(["ask", "x"], ("degraded",), names=("http://h",))
    assert outcome_problems(degraded, 0, "answer\nnote: kiwix: http://h: timeout\n", "") == []
    assert outcome_problems(degraded, 0, "answer\n", "") != []
    interrupt = CorpusRun(["ingest", "x"], ("interrupt",))
    assert outcome_problems(interrupt, 130, "", "folio: interrupted\n") == []
    assert outcome_problems(interrupt, 1, "", "folio: ingest failed: AssertionError\n") != []
    assert outcome_problems(CorpusRun(["books"], ("pipe",)), 141, "", "") == []


def test_the_corpus_covers_every_class_of_the_issue_with_at_least_118_cases() -> None:
    groups = {c.group for c in CASES}
    assert {"library-state", "library-path", "inputs", "settings", "servers", "llm-replies", "zim"} <= groups
    assert {"interrupt", "home", "pipe"} <= groups
    assert len(CASES) >= 118 and len({c.key for c in CASES}) == len(CASES)
    assert Path(__file__).with_name("fault_corpus.py").exists()
