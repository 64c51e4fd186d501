"""``folio doctor``'s helpers: what makes a book, a descriptor or a SQLite file damaged, and the report.
The command itself runs on generated damage in tests/test_hardening_cli.py."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from folio.dataflows.doctor import Checkup, Finding, book_fix, book_problems, report_lines, sqlite_problem
from folio.nodes.backends.library_index import descriptor_problem
from folio.nodes.core.types import ConceptMap

DESCRIPTOR = {
    "book_id": "b-1",
    "title": "B",
    "author": "A",
    "source_file": "/books/b.txt",
    "chapters": [{"chapter_id": "ch-1", "title": "One"}],
    "n_chunks": 3,
    "n_windows": 5,
}


def test_a_whole_book_has_no_problems():
    whole = ConceptMap(book_id="b-1", entities=(), themes=(), events=(), version=1).to_json()
    assert book_problems(DESCRIPTOR, (3, 5, 0), whole) == []
    assert book_problems(DESCRIPTOR, (3, 5, 0), None) == []


def test_counts_vectors_and_concept_map_are_each_named():
    problems = book_problems(DESCRIPTOR, (2, 4, 1), b"{{")
    assert problems[:3] == [
        "2 chunks stored, its descriptor says 3",
        "4 windows stored, its descriptor says 5",
        "1 window vectors of the wrong size",
    ]
    assert problems[3].startswith("damaged concept map (not a valid concept map")


def test_the_fix_names_the_source_file_when_it_is_known():
    assert book_fix("b-1", "/books/b.txt") == "`folio ingest /books/b.txt` again, or `folio remove b-1`"
    assert book_fix("b-1", None) == "ingest its file again, or `folio remove b-1`"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("{broken", "its descriptor is not JSON"),
        ("[1, 2]", "its descriptor is not a JSON object"),
        (json.dumps({**DESCRIPTOR, "title": None}), "its descriptor has no valid 'title'"),
        (json.dumps({**DESCRIPTOR, "n_chunks": "3"}), "its descriptor has no valid 'n_chunks'"),
        (json.dumps({**DESCRIPTOR, "book_id": "b-2"}), "its descriptor names another book ('b-2')"),
        (json.dumps({**DESCRIPTOR, "chapters": [{"title": "x"}]}), "its descriptor has a chapter without id"),
    ],
)
def test_a_damaged_descriptor_says_what_is_wrong(raw, problem):
    found = descriptor_problem("b-1", raw)
    assert found is not None and found.startswith(problem)


def test_a_readable_descriptor_has_no_problem():
    assert descriptor_problem("b-1", json.dumps(DESCRIPTOR)) is None


def test_sqlite_problem_tells_a_whole_file_from_garbage(tmp_path):
    whole = tmp_path / "whole.db"
    con = sqlite3.connect(whole)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    assert sqlite_problem(whole) is None
    assert sqlite_problem(garbage) == "file is not a database"


def test_the_report_ends_with_what_remains():
    repaired = Finding("/lib/vectors-1.usearch", "missing", "rebuilt", True)
    damaged = Finding("b-1", "damaged concept map", "`folio remove b-1`", False)
    assert report_lines(Checkup("/lib", 2, (repaired,))) == [
        "library /lib: 2 book(s) checked",
        "repaired  /lib/vectors-1.usearch: missing — rebuilt",
        "healthy (1 problem(s) repaired)",
    ]
    lines = report_lines(Checkup("/lib", 2, (repaired, damaged)))
    assert lines[-2:] == [
        "damaged   b-1: damaged concept map — `folio remove b-1`",
        "1 problem(s) remain: see the fixes above",
    ]
    assert Checkup("/lib", 2, (repaired,)).healthy and not Checkup("/lib", 2, (damaged,)).healthy
