"""``folio summary`` and the library's stored summaries on a real book (the abridged Alice EPUB): computed
once across processes (extractive, and with a scripted LLM server whose requests are counted), removed
with their book, pruned when a chapter changes, checked by ``folio doctor`` and ``folio cache``."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from folio.dataflows.api import ingest
from folio.dataflows.caching import cache_info
from folio.dataflows.doctor import examine
from folio.dataflows.library import Library
from folio.dataflows.summarizing import summary
from folio.nodes.backends.book_tools import forget_summaries
from folio.nodes.backends.summaries import EXTRACTIVE_ID, LLMSummarizer
from folio.nodes.backends.summary_store import store_path, summary_store
from tests.conftest import BOOKS, run_folio
from tests.servers import ScriptedLLMServer

# Golden: the extractive summary of the abridged Alice's first chapter (its three most central
# sentences, in order). A change to the extractive method must bump EXTRACTIVE_ID and this text.
ALICE_CHAPTER_1 = (
    "In another moment, down went Alice after it! The rabbit-hole went straight on like a tunnel for "
    "some way and then dipped suddenly down, so suddenly that Alice had not a moment to think about "
    "stopping herself before she found herself falling down what seemed to be a very deep well. This "
    'time she found a little bottle on it ("which certainly was not here before," said Alice), and tied '
    '\'round the neck of the bottle was a paper label, with the words "DRINK ME" beautifully printed on '
    "it in large letters."
)


def _fresh(library: Path) -> Path:
    """The library without stored summaries (a copy may carry some from another test's process)."""
    summary_store(library).close()
    shutil.rmtree(store_path(library).parent, ignore_errors=True)
    forget_summaries()
    return library


def _summary_cli(library: Path, *args: str) -> dict:
    done = run_folio("summary", *args, "--library", str(library), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _book(library: Path) -> str:
    return Library(library).book_ids()[0]


def test_an_extractive_summary_is_made_by_the_first_process_and_read_by_the_second(alice_copy: Path) -> None:
    library = _fresh(alice_copy)
    book = _book(library)
    first = _summary_cli(library, book, "1")
    assert first["computed"] is True and first["summariser"] == EXTRACTIVE_ID and first["notes"] == []
    assert first["summary"] == ALICE_CHAPTER_1 and first["chapter_title"] == "Down The Rabbit-Hole"  # golden
    assert cache_info(library)["summaries"] == 1
    # mark the stored row: a second process that printed it read the store, one that recomputed could not
    con = sqlite3.connect(store_path(library))
    with con:
        con.execute("UPDATE summaries SET text = 'STORED ' || text")
    con.close()
    second = _summary_cli(library, book, "1")
    assert second["computed"] is False and second["summary"] == "STORED " + first["summary"]
    done = run_folio("summary", book, "1", "--library", str(library))
    assert done.returncode == 0 and f"summariser: {EXTRACTIVE_ID} (read from the library)" in done.stdout
    assert run_folio("cache", "clear", "--library", str(library)).returncode == 0
    assert cache_info(library)["summaries"] == 0


def test_an_llm_summary_is_computed_once_across_two_processes(alice_copy: Path, tmp_path: Path) -> None:
    library = _fresh(alice_copy)
    book = _book(library)
    view = Library(library).store(book)
    chapter_id = list(view.titles)[1]
    calls = LLMSummarizer.chapter_calls(len(view.chunks_in([chapter_id])))
    with ScriptedLLMServer(["Alice swims in a pool of her own tears and meets a Mouse."] * 8) as server:
        config = tmp_path / "llm.yaml"
        config.write_text(f"llm: openai\nllm_base_url: {server.url}\nllm_model: {server.model}\n")
        first = _summary_cli(library, book, chapter_id, "--config", str(config))
        assert len(server.requests) == calls  # the map-reduce's bounded calls, once
        second = _summary_cli(library, book, chapter_id, "--config", str(config))
        assert len(server.requests) == calls  # the second process asked the LLM nothing
    assert first["computed"] is True and second["computed"] is False
    assert first["summariser"] == second["summariser"] == "llm:scripted-model:v1"
    assert first["summary"] == second["summary"]
    assert first["summary"].startswith("Alice swims in a pool of her own tears and meets a Mouse.")
    request = server.requests[0]
    assert request["max_tokens"] == 256 and "response_format" not in request
    assert view.titles[chapter_id] in request["messages"][-1]["content"]


def test_an_unreachable_llm_gives_the_extractive_summary_with_a_note(
    alice_copy: Path, tmp_path: Path
) -> None:
    from tests.servers import dead_url

    library = _fresh(alice_copy)
    config = tmp_path / "llm.yaml"
    config.write_text(f"llm: openai\nllm_base_url: {dead_url()}/v1\nllm_max_retries: 0\n")
    made = _summary_cli(library, _book(library), "1", "--config", str(config))
    assert made["summariser"] == EXTRACTIVE_ID and made["summary"] == ALICE_CHAPTER_1
    assert len(made["notes"]) == 1 and made["notes"][0].startswith("LLM chapter summary failed (")


def test_removing_a_book_drops_its_summaries(alice_copy: Path) -> None:
    library = _fresh(alice_copy)
    book = _book(library)
    summary(book, None, library=library)  # the synopsis and the first two chapters' summaries
    assert {r[0] for r in summary_store(library).rows()} == {book}
    assert run_folio("remove", book, "--library", str(library)).returncode == 0
    assert summary_store(library).rows() == []


def test_reingesting_an_edited_chapter_drops_only_its_summaries(tmp_path: Path) -> None:
    text = (BOOKS / "txt/pg11_carroll_alices-adventures-in-wonderland.txt").read_text(encoding="utf-8-sig")
    book_file = tmp_path / "alice-three-chapters.txt"  # the real text, cut before chapter IV
    book_file.write_text(text[: text.index("CHAPTER IV.")], encoding="utf-8")
    library = tmp_path / "library"
    assert ingest([book_file], library=library).ok
    book = _book(library)
    view = Library(library).store(book)
    first, second = list(view.titles)[:2]
    for chapter_id in (first, second):
        summary(book, chapter_id, library=library)
    before = {(r[2], r[3]) for r in summary_store(library).rows()}
    anchor = "Curiouser and curiouser!"  # chapter II
    edited = book_file.read_text(encoding="utf-8").replace(
        anchor, "Curiouser and curiouser, as this test insists!", 1
    )
    assert edited != book_file.read_text(encoding="utf-8")
    book_file.write_text(edited, encoding="utf-8")
    assert ingest([book_file], library=library).ok
    after = {(r[2], r[3]) for r in summary_store(library).rows()}
    kept = [row for row in before if row in after]
    assert len(before) == 2 and len(kept) == 1  # the untouched chapter's summary stays, the edited one goes
    forget_summaries()
    fresh = summary(book, "1", library=library)
    assert fresh["computed"] is False  # the first chapter (unchanged) is read back
    assert summary(book, "2", library=library)["computed"] is True  # the edited one is made again


def test_doctor_clears_a_damaged_summary_store(alice_copy: Path) -> None:
    library = _fresh(alice_copy)
    summary(_book(library), "1", library=library)
    summary_store(library).close()
    store_path(library).write_bytes(b"not a database at all " * 200)
    checkup = examine(Library(library))
    found = [f for f in checkup.findings if "summary store" in f.problem]
    assert len(found) == 1 and found[0].repaired and found[0].fix == "cleared"
    assert not store_path(library).exists()
    forget_summaries()
    again = summary(_book(library), "1", library=library)
    assert again["computed"] is True and again["notes"] == []


def test_the_agents_chapter_summary_is_made_by_the_llm_within_the_budget_and_stored(alice_copy: Path) -> None:
    from folio.dataflows.asking import ask
    from tests.servers import Reply

    library = _fresh(alice_copy)
    book = _book(library)
    view = Library(library).store(book)
    chapter_id = next(iter(view.titles))
    calls = LLMSummarizer.chapter_calls(len(view.chunks_in([chapter_id])))
    gist = "Alice follows a White Rabbit down a hole and falls into a hall of doors."
    script = [
        {"route": "BOOK", "confidence": 0.9, "suggested_queries": [], "book_ids": [book]},
        Reply.tools(("chapter_summary_get", {"chapter_id": chapter_id})),
        *[gist] * calls,
        Reply.answer("She falls down the rabbit hole."),
    ]
    with ScriptedLLMServer(script) as server:
        config = {"llm": "openai", "answer_mode": "agent", "llm_base_url": server.url}
        answer = ask(
            "What happens when Alice follows the White Rabbit?",
            library=library,
            config={**config, "llm_model": server.model, "llm_max_retries": 0},
        )
        tool_message = server.requests[2 + calls]["messages"][-1]
    assert tool_message["role"] == "tool" and gist in tool_message["content"]
    rows = summary_store(library).rows()
    assert [(r[2], r[4], r[5]) for r in rows] == [(chapter_id, "llm:scripted-model:v1", gist)]
    assert answer.tool_calls >= 4 + calls  # router, two agent turns, the tool and the summary's calls


def test_the_service_behind_folio_serve_and_mcp_reads_the_stored_summary(alice_copy: Path) -> None:
    from folio.dataflows.service import Service

    library = _fresh(alice_copy)
    book = _book(library)
    made = _summary_cli(library, book, "1")
    con = sqlite3.connect(store_path(library))
    with con:
        con.execute("UPDATE summaries SET text = 'FROM THE STORE ' || text")
    con.close()
    forget_summaries()
    service = Service(library, config={"search_mode": "lexical"})
    try:
        reply = json.loads(
            service.book_tools().call("chapter_summary_get", {"chapter_id": made["chapter_id"]})
        )
    finally:
        service.close()
    assert reply == {"chapter_id": made["chapter_id"], "summary": "FROM THE STORE " + made["summary"]}
