"""Rules of the design kept exactly (issue 32) that no stage's own test file covers."""

from __future__ import annotations

from pathlib import Path

from folio.dataflows.asking import ask
from folio.nodes.backends.book_tools import ToolBudget
from folio.nodes.backends.summaries import extractive_summary
from folio.nodes.backends.zim import ZimBackend
from folio.nodes.core.concept_names import entity_drafts as _entity_drafts
from folio.nodes.core.kiwix_types import Candidate, ScoredCandidate
from folio.nodes.core.text import sentences
from folio.nodes.core.types import Citation, RouteDecision, SourceResult
from folio.nodes.ingest.parsing import parsed_book
from folio.nodes.kiwix.fusion import kiwix_context
from folio.nodes.query.answering import NOT_FROM_BOOKS, answer
from folio.nodes.query.routing import ROUTER_SCHEMA, _validated
from folio.nodes.query.source_fusion import fused_context, source_plan
from tests.conftest import ZIMS
from tests.servers import Reply, ScriptedLLMServer

NO_OTHER_SOURCE = (
    "no other source is configured or reachable for a question outside the books: searched the books"
)
TARTS, BEATLES = "Who stole the tarts", "why did the Beatles stop touring"


def _answer(routes: tuple[RouteDecision, ...], results: tuple[SourceResult, ...]):
    return answer(
        " and ".join(r.question for r in routes), routes, fused_context(results), results, ToolBudget()
    )


def test_the_no_other_source_note_appears_only_when_a_non_book_clause_went_to_the_books() -> None:
    routes = (
        RouteDecision("BOOK", 0.9, (), ("alice",), "", TARTS),
        RouteDecision("NOT_BOOK", 0.9, (), (), "", BEATLES),
    )
    book = SourceResult(
        "book", "Alice", "The Knave of Hearts stole the tarts.", (Citation("book"),), clause=TARTS
    )
    kiwix = SourceResult(
        "kiwix", "The Beatles", "They stopped touring in 1966.", (Citation("kiwix"),), clause=BEATLES
    )
    assert NO_OTHER_SOURCE not in _answer(routes, (book, kiwix)).notes  # Kiwix answered the second clause
    searched = SourceResult("book", "Alice", "The Beatles sang.", (Citation("book"),), clause=BEATLES)
    assert NO_OTHER_SOURCE in _answer(routes, (book, searched)).notes  # no other source: the books took it


def test_a_multi_book_kiwix_context_holds_each_article_truncated_after_its_passage() -> None:
    wiki, ray = "wikipedia_en_100_mini_2022-10", "wikipedia_en_ray_charles_mini_2020-03"
    scored = (
        ScoredCandidate(Candidate(wiki, "A/The_Beatles", "The Beatles", "", ""), 30.0, ()),
        ScoredCandidate(Candidate(ray, "A/Eleanor_Rigby", "Eleanor Rigby", "", ""), 28.0, ()),
    )
    with ZimBackend([ZIMS / f"{wiki}.zim", ZIMS / f"{ray}.zim"]) as backend:
        ctx = kiwix_context(
            scored, (wiki, ray), backend, "Which Beatles song did Ray Charles cover?", None, 0.5, 900
        )
    bodies = ctx.text.split(f"\n\n[{ray} — Eleanor Rigby]\n")
    assert bodies[0].startswith(f"[{wiki} — The Beatles]\n") and len(bodies) == 2
    for body, section in zip((bodies[0].split("\n", 1)[1], bodies[1]), ctx.sections, strict=True):
        assert body.startswith(section.text + "\n\n")  # the reader's passage first
        assert len(section.text) + 300 < len(body) <= 900  # then the article, cut to the share
        assert 0 < len(section.text.split()) <= 60  # the sections (what the ask shows) stay the passages


def test_a_not_book_question_with_an_llm_and_no_other_source_is_answered_not_from_the_books(
    alice_library: Path,
) -> None:
    route = {"route": "NOT_BOOK", "confidence": 0.9, "suggested_queries": []}
    with ScriptedLLMServer([route, Reply.answer("Neon is a noble gas.")]) as server:
        cfg = {"llm": "openai", "llm_base_url": server.url, "llm_max_retries": 0, "kiwix": "none"}
        cfg["search_mode"] = "lexical"  # no model: the answer does not read the books
        got = ask("What is a noble gas?", library=alice_library, config=cfg)
        asked = server.requests[-1]
    assert got.answer == f"{NOT_FROM_BOOKS} Neon is a noble gas."
    assert got.sources_used == ("llm",) and got.citations == ()
    assert "tools" not in asked and "Excerpts" not in asked["messages"][-1]["content"]
    assert NO_OTHER_SOURCE not in got.notes  # the books were not what answered


def test_the_router_names_the_sources_a_non_book_clause_needs() -> None:
    answer = {
        "route": "NOT_BOOK",
        "confidence": 0.8,
        "suggested_queries": [],
        "sources": ["News", "news", "book"],
    }
    decision = _validated(answer, "who won the election", ())
    assert decision.sources == ("news",)  # validated and de-duplicated
    assert _validated({**answer, "route": "BOOK"}, "who is ahab", ()).sources == ()
    assert "sources" in ROUTER_SCHEMA["properties"]
    web = {"web": object(), "news": object()}
    only_news = RouteDecision("NOT_BOOK", 0.8, (), (), "", "who won the election", ("news",))
    assert source_plan((only_news,), web, True) == (("news", "who won the election"),)
    named_off = RouteDecision("NOT_BOOK", 0.8, (), (), "", "q", ("news",))
    assert source_plan((named_off,), {}, True) == (("kiwix", "q"),)  # none named is enabled: every one
    unnamed = RouteDecision("NOT_BOOK", 0.8, (), (), "", "q")
    assert source_plan((unnamed,), web, True) == (("kiwix", "q"), ("web", "q"), ("news", "q"))


def test_an_extractive_chapter_summary_has_section_headings_and_a_few_sentences_each(data_dir: Path) -> None:
    words = (data_dir / "books/txt/pg35_wells_the-time-machine.txt").read_text(encoding="utf-8").split()
    chunks = [" ".join(words[i : i + 600]) for i in range(2000, 2000 + 20 * 600, 600)]  # 20 real chunks
    overview, parts = extractive_summary(chunks).split("\n\n")
    lines = parts.split("\n")
    assert [line.split(":")[0] for line in lines] == [
        "Part 1 of 3 (chunks 1–7)",
        "Part 2 of 3 (chunks 8–14)",
        "Part 3 of 3 (chunks 15–20)",
    ]
    for text in (overview, *(line.split(": ", 1)[1] for line in lines)):
        assert 1 <= len(sentences(text)) <= 3 + 1  # a few sentences (an abbreviation may split one)
    assert extractive_summary(chunks[:5]).count("\n") == 0  # one section: its sentences alone


def test_a_name_the_text_introduces_and_then_shortens_is_one_entity(data_dir: Path) -> None:
    book = parsed_book(str(data_dir / "books/txt/pg11_carroll_alices-adventures-in-wonderland.txt"))
    drafts = {d.name: d for d in _entity_drafts([c.text for c in book.chapters])}
    assert {"Cheshire Cat", "Cat"} <= set(drafts["Cheshire Cat"].aliases)
    assert {"White Rabbit", "Rabbit"} <= set(drafts["White Rabbit"].aliases)
    assert "Cat" not in drafts and "Rabbit" not in drafts
    moby = parsed_book(str(data_dir / "books/epub/melville_moby-dick.epub"))
    names = {d.name: d for d in _entity_drafts([c.text for c in moby.chapters])}
    assert "England" not in names["New England"].aliases  # named alone in other chapters: apart
