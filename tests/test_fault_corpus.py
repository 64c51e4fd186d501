"""The fault corpus's cheap cases (tests/fault_corpus.py: those that load no model), one test each: the
real ``folio`` command in a fresh process against generated damage, hostile input and misbehaving
servers; ``make faults`` runs every case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fault_corpus import CASES, Case, Shared, corpus_root, outcome_problems, run_case
from tests.fault_corpus import Run as CorpusRun

# The cases of the test suite: one or more per class, the cheap ones (each about 1-3 s; the server ones
# up to the ask deadline); ``make faults`` runs all of them.
SUITE = (
    "library-state/descriptor-not-json-books",
    "library-state/sqlite-garbage-search",
    "library-state/sqlite-of-another-program-books",
    "library-state/concept-map-damaged-concepts",
    "library-path/library-is-a-file-ingest-book",
    "library-path/read-only-search",
    "inputs/fifo-txt",
    "inputs/sparse-5gb-txt",
    "inputs/folder-symlink-leaving-it",
    "inputs/entity-bomb-opf",
    "inputs/path-too-long",
    "settings/env-sources-bogus",
    "settings/yaml-is-a-fifo",
    "settings/chapter-33000-times",
    "settings/serve-port-out-of-range",
    "servers/done-when-trickling-llm-ask-within-deadline",
    "servers/done-when-trickling-kiwix-ask-within-deadline",
    "llm-replies/pipeline-message-not-object",
    "llm-replies/kiwix-ranking-content-not-string",
    "zim/cluster-damaged-middle-beside-good-ask",
    "zim/fifo-alone-kiwix",
    "interrupt/ctrl-c-during-ask-hanging-llm",
    "pipe/closed-books-json",
    "holds/second-writer-is-refused-in-one-line",
    "service/cli-remove-empty-id",
    "service/foreign-host-421",
    "mcp/params-not-an-object",
    "concurrency/books-while-a-writer-commits",
    "upgrade/book-sqlite-missing",
    "book-formats/pdf-100000-empty-pages",
    "book-formats/zip-bomb-docx",
)
FAST = [c for c in CASES if c.key in SUITE]


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
    assert set(SUITE) <= {c.key for c in CASES if c.cheap}
