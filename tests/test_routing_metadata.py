"""Routing knows a book's series and every author (nodes/query/routing.py, from Calibre metadata)."""

from __future__ import annotations

from types import SimpleNamespace

from folio.nodes.core.types import BookInfo
from folio.nodes.query.routing import TITLE_SIGNAL, _book_signal, book_catalog

HOUND = BookInfo(
    "hound",
    "The Hound of the Baskervilles",
    "Arthur Conan Doyle",
    "en",
    series="Sherlock Holmes",
    authors=("Arthur Conan Doyle",),
)
BUCH = BookInfo(
    "buch",
    "Der Buchtitel",
    "Frodo Beutlin and Hector Gonçalves",
    authors=("Frodo Beutlin", "Hector Gonçalves"),
)


def test_a_clause_naming_the_series_names_the_book() -> None:
    signal, why = _book_signal(HOUND, "Who is the villain in the Sherlock Holmes stories?", None, "")
    assert signal == TITLE_SIGNAL and "Hound" in why
    plain, _ = _book_signal(HOUND, "Who is the villain in the detective stories?", None, "")
    assert plain < TITLE_SIGNAL
    partial, _ = _book_signal(HOUND, "Who is Sherlock?", None, "")  # one word of the series is not enough
    assert partial < TITLE_SIGNAL


def test_every_author_names_the_book_not_only_the_last_one() -> None:
    assert _book_signal(BUCH, "What did Beutlin write?", None, "")[0] == TITLE_SIGNAL
    assert _book_signal(BUCH, "What did Gonçalves write?", None, "")[0] == TITLE_SIGNAL
    assert _book_signal(BUCH, "What did Tolstoy write?", None, "")[0] < TITLE_SIGNAL


def test_the_catalog_carries_series_and_authors_from_the_descriptor() -> None:
    descriptor = {
        "title": "The Hound of the Baskervilles",
        "author": "Arthur Conan Doyle",
        "language": "en",
        "series": "Sherlock Holmes",
        "authors": ["Arthur Conan Doyle"],
    }
    old = {"title": "Alice", "author": "Lewis Carroll", "language": "en"}  # ingested before the metadata
    stores = {
        "hound": SimpleNamespace(book_id="hound", descriptor=descriptor),
        "alice": SimpleNamespace(book_id="alice", descriptor=old),
    }
    assert book_catalog(stores) == (BookInfo("alice", "Alice", "Lewis Carroll", "en"), HOUND)
