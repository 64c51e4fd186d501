"""Book filters (dataflows/filtering.py): what each field matches, and one line when nothing does."""

from __future__ import annotations

import argparse

import pytest

from folio.dataflows.filtering import BookFilter, book_line, language_code, matching_ids
from folio.nodes.core.types import FolioError

BOOKS = [
    {
        "book_id": "hound",
        "title": "The Hound of the Baskervilles",
        "author": "Arthur Conan Doyle",
        "authors": ["Arthur Conan Doyle"],
        "series": "Sherlock Holmes",
        "series_index": 5.0,
        "tags": ["Detective", "Mystery"],
        "language": "eng",
        "format": "epub",
    },
    {
        "book_id": "buch",
        "title": "Der Buchtitel",
        "author": "Frodo Beutlin and Hector Gonçalves",
        "authors": ["Frodo Beutlin", "Hector Gonçalves"],
        "tags": ["Gênot"],
        "language": "de",
        "format": "txt",
    },
    {"book_id": "old", "title": "Old", "author": "Jane Austen", "language": "en-GB", "format": "txt"},
]


@pytest.mark.parametrize(
    ("given", "ids"),
    [
        ({"author": "doyle"}, ["hound"]),
        ({"author": "CONAN DOYLE"}, ["hound"]),
        ({"author": "goncalves"}, ["buch"]),  # accents ignored
        ({"author": "austen"}, ["old"]),  # a descriptor without "authors" (ingested before) matches too
        ({"series": "sherlock"}, ["hound"]),
        ({"tag": "genot"}, ["buch"]),
        ({"tag": "myst"}, []),  # a tag is matched whole
        ({"language": "en"}, ["hound", "old"]),  # eng = en = en-GB
        ({"language": "ger"}, ["buch"]),
        ({"format": ".TXT"}, ["buch", "old"]),
        ({"format": "txt", "author": "austen"}, ["old"]),  # every field must match
        ({}, ["hound", "buch", "old"]),
    ],
)
def test_each_field_matches_as_documented(given: dict, ids: list[str]) -> None:
    flt = BookFilter.of(given)
    assert [b["book_id"] for b in BOOKS if flt.matches(b)] == ids


def test_a_filter_matching_no_book_is_one_line_naming_it() -> None:
    with pytest.raises(FolioError) as caught:
        matching_ids(BOOKS, BookFilter(author="Tolstoy"))
    assert "--author 'Tolstoy'" in str(caught.value) and "3" in str(caught.value)
    assert matching_ids(BOOKS, BookFilter()) == ["hound", "buch", "old"]


def test_filters_come_from_argparse_or_json_and_refuse_non_text() -> None:
    assert BookFilter.of(argparse.Namespace(author=" Doyle ", tag=None, query="x")) == BookFilter(
        author="Doyle"
    )
    assert not BookFilter.of({"author": "  ", "series": None})
    with pytest.raises(FolioError):
        BookFilter.of({"tag": ["a", "b"]})
    assert language_code("nob") == "nb" and language_code("pt_BR") == "pt" and language_code("xx") == "xx"


def test_a_books_line_shows_series_tags_language_and_format() -> None:
    line = book_line(BOOKS[0])
    assert (
        line == "The Hound of the Baskervilles — Arthur Conan Doyle "
        "[Sherlock Holmes #5; Detective, Mystery; eng, epub]"
    )
