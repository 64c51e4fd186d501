"""Search over a real ingested library: modes, filters, JSON shape, hostile FTS5 queries."""

import json
import os
import subprocess
import sys

import pytest

from folio.dataflows.api import search
from folio.dataflows.library import Library
from folio.nodes.core.types import FolioError
from tests.conftest import REPO_DIR

HOSTILE = [
    '"',
    '"unbalanced quote',
    "NEAR(",
    "NEAR(rabbit hole",
    "*",
    "rabbit*",
    "-",
    "-rabbit",
    "AND",
    "rabbit AND",
    "(((",
    "rabbit)",
    "?!.,;:",
    "OR NOT",
    "^",
    "col:rabbit",
    "''",
    "\\",
    "%_",
    "rabbit -- '; DROP TABLE chunks; --",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(alice_library, query):
    for mode in ("lexical", "hybrid"):
        hits = search(query, library=alice_library, mode=mode, k=5)
        assert isinstance(hits, list)


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_each_mode_finds_the_mad_tea_party(alice_library, mode):
    hits = search("the Hatter and the March Hare having tea", library=alice_library, mode=mode, k=3)
    assert any("Tea" in h.chapter_title for h in hits[:3]), [h.chapter_title for h in hits]


def test_hits_are_located_exactly(alice_library):
    lib = Library(alice_library)
    hits = search("Queen of Hearts croquet", library=lib, k=5)
    assert hits
    for h in hits:
        assert lib.store(h.book_id).chapter_text(h.chapter_id)[h.start : h.end] == h.text


def test_chapter_filter_restricts_hits(alice_library):
    lib = Library(alice_library)
    (book,) = lib.descriptors()
    chapter = book["chapters"][3]["chapter_id"]
    for mode in ("lexical", "semantic", "hybrid"):
        hits = search("Alice", library=lib, chapter=chapter, mode=mode, k=5)
        assert hits and {h.chapter_id for h in hits} == {chapter}


def test_unknown_book_is_a_one_line_error(alice_library):
    with pytest.raises(FolioError, match="no such book"):
        search("rabbit", library=alice_library, book="moby-dick")


def test_search_json_has_the_documented_fields(alice_library):
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "folio.dataflows.cli",
            "search",
            "white rabbit",
            "--library",
            str(alice_library),
            "--json",
            "-k",
            "3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 3
    assert set(rows[0]) == {
        "book_id",
        "book_title",
        "chapter_id",
        "chapter_title",
        "chunk_id",
        "start",
        "end",
        "page",
        "percent",
        "score",
        "text",
    }
    assert rows[0]["book_title"].startswith("Alice") and rows[0]["page"] == ""  # an EPUB: located by percent
    assert all(0 <= row["percent"] <= 100 for row in rows)
