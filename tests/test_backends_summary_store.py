"""The summary store (``nodes.backends.summary_store``) and the book tools' summaries over it: made once,
read back, keyed by content and summariser, pruned, and degraded (read-only, damaged, LLM failures,
budget) with one note and never an exception. A small fake book stands in for a library book."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from folio.nodes.backends.book_tools import BookTools, Session, ToolBudget, forget_summaries
from folio.nodes.backends.llm import LLMError
from folio.nodes.backends.summaries import EXTRACTIVE_ID, LLMSummarizer
from folio.nodes.backends.summary_store import (
    SummaryKey,
    SummaryStore,
    current_keys,
    store_path,
    summary_store,
    synopsis_hash,
    text_hash,
)
from folio.nodes.core.types import Hit

CHAPTERS = {
    "ch-1": (
        "The rabbit ran to the garden and ate the lettuce there. The farmer saw the rabbit in the garden. "
        "The farmer chased the rabbit out of the garden with a rake. The rabbit hid under the gate all day."
    ),
    "ch-2": (
        "The cat sat by the well and watched the birds. The birds flew over the well and the cat. "
        "The cat climbed the well to catch the birds. The birds laughed at the cat from the roof."
    ),
}


@dataclass
class FakeIndex:
    directory: Path


class FakeBook:
    """The parts of a ``BookStore`` the summaries read."""

    def __init__(self, directory: Path, chapters: dict[str, str] = CHAPTERS) -> None:
        self.index = FakeIndex(directory)
        self.book_id = "book-1"
        self.chapters = dict(chapters)
        self.titles = {cid: f"Title of {cid}" for cid in chapters}
        self.descriptor = {
            "book_id": self.book_id,
            "title": "A Book",
            "author": "An Author",
            "content_hash": "abc",
            "chapters": [{"chapter_id": c, "title": t} for c, t in self.titles.items()],
        }
        self.reads = 0

    def chapter_text(self, chapter_id: str) -> str:
        return self.chapters[chapter_id]

    def chunks_in(self, chapter_ids: list[str]) -> list[Hit]:
        self.reads += 1
        cid = chapter_ids[0]
        text = self.chapters[cid]
        return [Hit(self.book_id, cid, self.titles[cid], f"{cid}.001", 0, len(text), 0.0, text)]


@dataclass
class Reply:
    content: str


class CountingClient:
    model = "counting-model"

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def chat(self, messages: list, max_tokens: int | None = None, deadline: Any = None) -> Reply:
        self.calls += 1
        if self.fail:
            raise LLMError("http://127.0.0.1:1/v1/chat/completions", "timed out after 30 s")
        return Reply("The rabbit raided the garden and escaped the farmer.")


@pytest.fixture(autouse=True)
def _fresh_memory() -> None:
    forget_summaries()  # each test starts as a new process would (the store persists)


def tools_for(book: FakeBook, summarizer: LLMSummarizer | None = None, budget: int = 8) -> BookTools:
    return BookTools({book.book_id: book}, {}, None, ToolBudget(budget), Session(), summarizer=summarizer)


def test_put_get_and_keys(tmp_path: Path) -> None:
    store = SummaryStore(tmp_path / "s.db")
    key = SummaryKey("b", "chapter", "c1", "h1", EXTRACTIVE_ID)
    assert store.get(key) is None and not (tmp_path / "s.db").exists()  # reading creates nothing
    assert store.put(key, "text one")
    assert store.get(key) == "text one"
    assert store.get(SummaryKey("b", "chapter", "c1", "h2", EXTRACTIVE_ID)) is None  # other content
    assert store.get(SummaryKey("b", "chapter", "c1", "h1", "llm:m:v1")) is None  # other summariser
    assert store.keys("b") == {("chapter", "c1", "h1")} and store.book_ids() == ["b"]


def test_prune_keeps_current_keys_and_drop_removes_a_book(tmp_path: Path) -> None:
    store = SummaryStore(tmp_path / "s.db")
    for kind, chapter, digest in (("chapter", "c1", "old"), ("chapter", "c1", "new"), ("synopsis", "", "s")):
        store.put(SummaryKey("b", kind, chapter, digest, EXTRACTIVE_ID), "t")
    store.put(SummaryKey("other", "chapter", "c1", "x", EXTRACTIVE_ID), "t")
    assert store.prune("b", {("chapter", "c1", "new"), ("synopsis", "", "s")}) == 1
    assert store.keys("b") == {("chapter", "c1", "new"), ("synopsis", "", "s")}
    assert store.drop("b") == 2 and store.book_ids() == ["other"]


def test_current_keys_hash_each_chapters_text_and_the_synopsis(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    keys = current_keys(book)
    assert ("chapter", "ch-1", text_hash(CHAPTERS["ch-1"])) in keys
    assert ("synopsis", "", synopsis_hash(book.descriptor)) in keys and len(keys) == 3
    changed = dict(book.descriptor, content_hash="other")
    assert synopsis_hash(changed) != synopsis_hash(book.descriptor)


def test_an_extractive_summary_is_made_once_then_read_back_from_the_library(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    first = tools_for(book).summary_of("ch-1")
    assert first.computed and first.summariser == EXTRACTIVE_ID and "rabbit" in first.text
    stored = summary_store(tmp_path).rows()
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in stored] == [
        ("book-1", "chapter", "ch-1", text_hash(CHAPTERS["ch-1"]), EXTRACTIVE_ID)
    ]
    forget_summaries()  # a new process: only the store remembers
    reads = book.reads
    again = tools_for(book).summary_of("ch-1")
    assert not again.computed and again.text == first.text and book.reads == reads  # no chunk read
    assert store_path(tmp_path) == tmp_path / "cache" / "summaries" / "summaries.db"


def test_a_changed_chapter_is_summarised_again(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    tools_for(book).summary_of("ch-1")
    forget_summaries()
    book.chapters["ch-1"] = "A new text about a dog that barked at the moon all night long in the yard."
    changed = tools_for(book).summary_of("ch-1")
    assert changed.computed and "dog" in changed.text


def test_an_llm_summary_costs_its_calls_once_across_processes(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    client = CountingClient()
    first = tools_for(book, LLMSummarizer(client)).summary_of("ch-1")
    assert first.computed and first.summariser == "llm:counting-model:v1" and client.calls == 1
    assert first.text == "The rabbit raided the garden and escaped the farmer."
    forget_summaries()
    again = tools_for(book, LLMSummarizer(client)).summary_of("ch-1")
    assert not again.computed and again.text == first.text and client.calls == 1
    extractive = tools_for(book).summary_of("ch-1")  # llm: none keeps its own summary
    assert extractive.summariser == EXTRACTIVE_ID and extractive.computed


def test_a_failed_llm_summary_falls_back_to_extractive_with_a_note(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    tools = tools_for(book, LLMSummarizer(CountingClient(fail=True)))
    made = tools.summary_of("ch-1")
    assert made.summariser == EXTRACTIVE_ID and "rabbit" in made.text
    assert made.notes == (
        "LLM chapter summary failed (timed out after 30 s): extractive chapter summary given",
    )
    assert tools.summary_notes == list(made.notes)
    rows = summary_store(tmp_path).rows()
    assert [r[4] for r in rows] == [EXTRACTIVE_ID]  # the LLM's key stays free: the next request tries again


def test_an_llm_summary_that_the_budget_cannot_pay_is_extractive_with_a_note(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    budget = ToolBudget(2)  # the tool call, then one left: the answer's, not the summary's
    client = CountingClient()
    tools = BookTools({book.book_id: book}, {}, None, budget, Session(), LLMSummarizer(client, budget=budget))
    reply = tools.call("chapter_summary_get", {"chapter_id": "ch-1"})
    assert client.calls == 0
    note = "an LLM chapter summary takes 1 call(s) and one more is kept for the answer, but 1 are left"
    assert json.loads(reply)["notes"][0].startswith(note)


def test_a_read_only_library_computes_without_storing_and_says_so_once(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes to read-only directories")
    book = FakeBook(tmp_path)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        tools = tools_for(book)
        made = tools.summary_of("ch-1")
        tools.summary_of("ch-2")
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert made.computed and "rabbit" in made.text
    assert len(made.notes) == 1 and made.notes[0].startswith("summaries are not stored in the library (")
    assert len(tools.summary_notes) == 1


def test_a_store_that_cannot_be_created_computes_without_storing_and_says_so_once(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    (tmp_path / "cache").write_text("a file where the cache folder should be")  # works as root too
    tools = tools_for(book)
    made = tools.summary_of("ch-1")
    tools.summary_of("ch-2")
    assert made.computed and "rabbit" in made.text
    assert made.notes == (
        "summaries are not stored in the library (NotADirectoryError: Not a directory): "
        "kept for this process only",
    )
    assert tools.summary_notes == list(made.notes)
    forget_summaries()
    assert tools_for(book).summary_of("ch-1").computed  # nothing was stored


def test_a_read_only_library_still_reads_its_stored_summaries(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes to read-only directories")
    book = FakeBook(tmp_path)
    first = tools_for(book).summary_of("ch-1")
    summary_store(tmp_path).close()
    forget_summaries()
    folder = store_path(tmp_path).parent
    for path in folder.iterdir():
        path.chmod(stat.S_IRUSR)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        again = tools_for(book).summary_of("ch-1")
    finally:
        folder.chmod(stat.S_IRWXU)
        for path in folder.iterdir():
            path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert not again.computed and again.text == first.text


def test_a_damaged_store_degrades_to_computing_with_a_note(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    path = store_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    summary_store(tmp_path).close()
    made = tools_for(book).summary_of("ch-2")
    assert made.computed and "cat" in made.text
    assert len(made.notes) == 1 and "not a database" in made.notes[0]


def test_the_synopsis_is_stored_and_starts_with_title_and_author(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    first = tools_for(book).synopsis_of("book-1")
    assert first.computed and first.text.startswith(
        "A Book by An Author. Chapters: Title of ch-1, Title of ch-2."
    )
    forget_summaries()
    again = tools_for(book).synopsis_of("book-1")
    assert not again.computed and again.text == first.text
    kinds = sorted((r[1], r[2]) for r in summary_store(tmp_path).rows())
    assert kinds == [("chapter", "ch-1"), ("chapter", "ch-2"), ("synopsis", "")]


def test_an_llm_synopsis_reduces_every_chapter_in_one_call_here(tmp_path: Path) -> None:
    book = FakeBook(tmp_path)
    client = CountingClient()
    made = tools_for(book, LLMSummarizer(client)).synopsis_of("book-1")
    assert made.summariser == "llm:counting-model:v1" and client.calls == 1
    assert made.text.startswith("A Book by An Author.\nThe rabbit raided the garden")
