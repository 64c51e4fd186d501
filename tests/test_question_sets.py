"""The issue-27 question sets (tests/qa/books27_*, novels_*, kiwix27_*, library27): their shape, their
split, and that every answer lies where the line says, checked against the real texts (no ingest, no
model)."""

from __future__ import annotations

import functools
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from lxml import html

from folio.nodes.core.gold import normalised as _norm
from folio.nodes.eval.metrics import _answer_norm, qa_items
from tests.conftest import DATA_DIR, ZIMS

QA_DIR = Path(__file__).parent / "qa"
KINDS = ("concrete", "why", "whole", "other")


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (QA_DIR / name).read_text(encoding="utf-8").splitlines() if line]


@functools.lru_cache(maxsize=8)
def _book_words(book_file: str) -> str:
    """A book's text, normalised as the gold quotes are (``_norm``): an EPUB's documents, a MOBI's or an
    HTML file's chapters as Folio's own reader gives them (MOBI is compressed; HTML has entities), else
    the file's text."""
    from folio.nodes.readers import html as html_reader
    from folio.nodes.readers import mobi

    path = DATA_DIR / book_file
    if path.suffix == ".epub":
        with zipfile.ZipFile(path) as z:
            parts = [n for n in sorted(z.namelist()) if n.endswith((".xhtml", ".html", ".htm"))]
            return _norm("\n".join(html.fromstring(z.read(n)).text_content() for n in parts))
    if path.suffix in (".mobi", ".html"):
        reader = mobi if path.suffix == ".mobi" else html_reader
        book = reader.read(str(path), path.read_bytes(), 50_000_000)
        return _norm("\n".join(c.text for c in book.chapters))
    return _norm(path.read_text(encoding="utf-8", errors="replace"))


def test_book_sets_cover_six_books_split_by_book_with_the_asked_mix_of_kinds():
    dev, test = _lines("books27_dev.jsonl"), _lines("books27_test.jsonl")
    assert len(dev) + len(test) >= 150
    dev_books, test_books = {r["book_file"] for r in dev}, {r["book_file"] for r in test}
    assert len(dev_books | test_books) >= 6 and not dev_books & test_books
    kinds = Counter(r["type"] for r in dev + test)
    assert set(kinds) <= set(KINDS)
    n = len(dev) + len(test)
    assert kinds["concrete"] / n >= 0.3 and kinds["why"] / n >= 0.3 and kinds["whole"] / n >= 1 / 6 - 0.01
    for row in dev + test:
        assert row["answers"], row["id"]
        assert row["type"] == "whole" or row["gold_quote"], row["id"]
    assert len(qa_items(str(QA_DIR / "books27_test.jsonl"))) == len(test)  # folio eval reads them


def test_the_novel_sets_are_split_by_book_with_chapters_all_through_each_book():
    dev, test = _lines("novels_dev.jsonl"), _lines("novels_test.jsonl")
    dev_books, test_books = {r["book_file"] for r in dev}, {r["book_file"] for r in test}
    assert len(dev_books) == 2 and len(test_books) == 1 and not dev_books & test_books
    for rows in (dev, test):
        for book in {r["book_file"] for r in rows}:
            mine = [r for r in rows if r["book_file"] == book]
            kinds = Counter(r["type"] for r in mine)
            assert kinds["concrete"] == 15 and kinds["why"] == 9 and set(kinds) <= set(KINDS)
            assert len({r["gold_chapter"] for r in mine if r.get("gold_chapter")}) >= 12  # whole book
    assert len(qa_items(str(QA_DIR / "novels_test.jsonl"))) == len(test)


@pytest.mark.parametrize("name", ["novels_dev.jsonl", "novels_test.jsonl"])
def test_every_novel_answer_is_beside_its_quote_once_in_the_book(name):
    for row in _lines(name):
        if not row.get("gold_quote"):
            continue
        text, quote = _book_words(row["book_file"]), _norm(row["gold_quote"])
        assert text.count(quote) == 1, row["id"]
        at = text.index(quote)
        near = " " + _answer_norm(text[max(0, at - 400) : at + len(quote) + 400]) + " "
        assert any(" " + _answer_norm(a) + " " in near for a in row["answers"]), row["id"]


@pytest.mark.parametrize("name", ["books27_dev.jsonl", "books27_test.jsonl"])
def test_every_gold_quote_is_in_its_book(name):
    for row in _lines(name):
        if row.get("gold_quote"):
            assert _norm(row["gold_quote"]) in _book_words(row["book_file"]), row["id"]


@functools.lru_cache(maxsize=8)
def _archive(zim: str):
    from libzim.reader import Archive

    return Archive(str(ZIMS / f"{zim}.zim"))


def _paragraphs(zim: str, path: str) -> list[str]:
    doc = html.fromstring(bytes(_archive(zim).get_entry_by_path(path).get_item().content))
    for bad in doc.xpath("//table|//style|//script|//sup|//figure"):
        bad.getparent().remove(bad)
    paras = [" ".join(p.text_content().split()) for p in doc.xpath("//p")]
    return [p for p in paras if len(p) > 40]


def test_kiwix_sets_split_by_article_and_answer_past_the_first_paragraph():
    dev, test = _lines("kiwix27_dev.jsonl"), _lines("kiwix27_test.jsonl")
    assert len(dev) + len(test) >= 100
    key = lambda r: (r["gold_zim"], r["gold_path"])  # noqa: E731
    assert not {key(r) for r in dev} & {key(r) for r in test}
    for row in dev + test:
        paras = [f" {_answer_norm(p)} " for p in _paragraphs(row["gold_zim"], row["gold_path"])]
        wanted = [f" {_answer_norm(a)} " for a in row["answers"]]
        assert not any(a in paras[0] for a in wanted), row["id"]  # not in the first paragraph
        assert any(a in p for a in wanted for p in paras[1:]), row["id"]


def test_library_set_has_questions_to_refuse_and_to_answer():
    dev, test = _lines("library27_dev.jsonl"), _lines("library27_test.jsonl")
    rows = dev + test
    assert Counter(r["expect"] for r in rows) == {"refuse": 20, "answer": 20}
    assert len({r["id"] for r in rows}) == 40
    for name in ("library27_dev.jsonl", "library27_test.jsonl"):
        assert all(i.kind == "library" for i in qa_items(str(QA_DIR / name)))
    # split by book as books27 is: every question to answer lies in a book of its half
    for rows_, books in ((dev, "books27_dev.jsonl"), (test, "books27_test.jsonl")):
        assert {r["book_file"] for r in rows_ if "book_file" in r} <= {r["book_file"] for r in _lines(books)}
