"""Router: clause splitting, the deterministic rule per route, AMBIGUOUS resolution, the LLM router."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.dataflows.asking import _library, ask_config, ask_driver
from folio.nodes.backends.book_tools import BookTools, Session, ToolBudget
from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.core.types import BookInfo, RouteDecision
from folio.nodes.query.routing import _clauses, _decide, _resolve_ambiguous, _validated, routes__openai
from tests.servers import Reply, ScriptedLLMServer


def route_of(library: Path, question: str) -> tuple[RouteDecision, ...]:
    cfg = ask_config({"llm": "none"})
    _, stores, maps = _library(library)
    out = ask_driver(cfg).execute(
        ["routes", "tool_budget"],
        inputs={
            "question": question,
            "book_stores": stores,
            "concept_maps": maps,
            "encoder": None,
            "session": Session(),
        },
    )
    return out["routes"]


def test_compound_question_is_split_before_a_new_question() -> None:
    assert _clauses("indoor air quality and are the doors locked") == (
        "indoor air quality",
        "are the doors locked",
    )
    assert _clauses("Who is Ahab? Why does he hunt the whale?") == (
        "Who is Ahab",
        "Why does he hunt the whale",
    )


def test_and_between_nouns_keeps_one_clause() -> None:
    assert _clauses("Where did the brother and sister go?") == ("Where did the brother and sister go",)


def test_decide_thresholds_give_each_route() -> None:
    assert _decide("q", [("a", 0.8, ""), ("b", 0.2, "")]).route == "BOOK"
    assert _decide("q", [("a", 0.29, ""), ("b", 0.1, "")]).route == "NOT_BOOK"
    ambiguous = _decide("q", [("a", 0.45, ""), ("b", 0.4, "")])
    assert (ambiguous.route, ambiguous.book_ids) == ("AMBIGUOUS", ("a", "b"))


def test_named_character_routes_to_its_book(fairytale_library: Path) -> None:
    (decision,) = route_of(fairytale_library, "What did Peter Rabbit lose in the garden?")
    assert decision.route == "BOOK"
    assert decision.book_ids[0].startswith("the-great-big-treasury-of-beatrix-potter")


def test_question_spanning_two_books_searches_both(fairytale_library: Path) -> None:
    (decision,) = route_of(fairytale_library, "Is Peter Rabbit braver than Hansel?")
    assert decision.route == "BOOK"
    assert {b.split("-")[0] for b in decision.book_ids} == {"the", "household"}


def test_general_knowledge_question_routes_not_book(fairytale_library: Path) -> None:
    (decision,) = route_of(fairytale_library, "What is the atomic number of neon?")
    assert decision.route == "NOT_BOOK"


def test_ambiguous_is_resolved_by_exactly_one_concept_lookup(fairytale_library: Path) -> None:
    _, stores, maps = _library(fairytale_library)
    budget = ToolBudget(8)
    tools = BookTools(stores, {b: m for b, m in maps.items() if m}, None, budget, Session())
    book = _resolve_ambiguous(RouteDecision("AMBIGUOUS", 0.5, (), (), "", "Peter Rabbit"), tools)
    assert book.route == "BOOK" and book.book_ids[0].startswith("the-great-big-treasury")
    not_book = _resolve_ambiguous(
        RouteDecision("AMBIGUOUS", 0.5, (), (), "", "quantum chromodynamics"), tools
    )
    assert not_book.route == "NOT_BOOK"
    assert budget.calls == ["book_concept_map.lookup", "book_concept_map.lookup"]


def test_a_concept_matched_by_one_word_of_a_name_the_book_never_writes_does_not_route(
    sherlock_library: Path,
) -> None:
    # "What is the Pool of Tears?" (Alice's chapter II) matched Sherlock's concept "Boscombe Pool" by one
    # word: the clause went to The Adventures of Sherlock Holmes alone and was refused there ("Not in the
    # books searched: Tears"), or, with the sample ZIMs, answered from the song "Drown in My Own Tears"
    _, stores, maps = _library(sherlock_library)
    budget = ToolBudget(8)
    tools = BookTools(stores, {b: m for b, m in maps.items() if m}, None, budget, Session())
    tears = _resolve_ambiguous(
        RouteDecision("AMBIGUOUS", 0.5, (), (), "", "What is the Pool of Tears?"), tools
    )
    assert tears.route == "NOT_BOOK", tears
    pool = _resolve_ambiguous(RouteDecision("AMBIGUOUS", 0.5, (), (), "", "What is Boscombe Pool?"), tools)
    assert pool.route == "BOOK" and pool.book_ids[0].startswith("the-adventures-of-sherlock-holmes")
    assert budget.calls == ["book_concept_map.lookup", "book_concept_map.lookup"]


def test_llm_route_is_validated() -> None:
    books = (BookInfo("moby", "Moby-Dick", "Herman Melville"),)
    ok = _validated(
        {"route": "BOOK", "confidence": 0.9, "suggested_queries": ["ahab leg"], "book_ids": ["moby", "x"]},
        "q",
        books,
    )
    assert (ok.route, ok.book_ids, ok.suggested_queries) == ("BOOK", ("moby",), ("ahab leg",))
    for bad in (
        {"route": "MAYBE", "confidence": 0.5, "suggested_queries": []},
        {"route": "BOOK", "confidence": 1.5, "suggested_queries": []},
        {"route": "BOOK", "confidence": 0.5, "suggested_queries": "ahab"},
    ):
        with pytest.raises(ValueError):
            _validated(bad, "q", books)


def _llm_routes(
    fairytale_library: Path, replies: list, question: str
) -> tuple[tuple[RouteDecision, ...], ScriptedLLMServer, ToolBudget]:
    _, stores, maps = _library(fairytale_library)
    cfg = ask_config({"llm": "none"})
    fallback = ask_driver(cfg).execute(
        ["deterministic_routes"],
        inputs={"question": question, "book_stores": stores, "concept_maps": maps},
    )["deterministic_routes"]
    server = ScriptedLLMServer(replies)
    budget = ToolBudget(8)
    client = OpenAIChatClient(server.url, "m", max_retries=0, on_call=budget.on_llm_call)
    tools = BookTools(stores, {b: m for b, m in maps.items() if m}, None, budget, Session())
    catalog = tuple(
        BookInfo(s.book_id, s.descriptor["title"], s.descriptor["author"]) for s in stores.values()
    )
    try:
        return routes__openai(fallback, catalog, tools, client), server, budget
    finally:
        server.close()


def test_llm_router_answer_is_used_and_counted(fairytale_library: Path) -> None:
    reply = {"route": "NOT_BOOK", "confidence": 0.8, "suggested_queries": ["rabbit biology"]}
    (decision,), server, budget = _llm_routes(fairytale_library, [reply], "What do rabbits eat in the wild?")
    assert (decision.route, decision.reason) == ("NOT_BOOK", "LLM router")
    assert "Beatrix Potter" in server.requests[0]["messages"][0]["content"]
    assert budget.calls == ["llm"]


def test_a_question_about_the_library_itself_goes_to_the_catalogue_without_the_llm(
    fairytale_library: Path,
) -> None:
    # the LLM would send it elsewhere; the catalogue answers it (whole_book.LIBRARY_ASK), no request made
    reply = {"route": "NOT_BOOK", "confidence": 0.9, "suggested_queries": ["library"]}
    (decision,), server, budget = _llm_routes(fairytale_library, [reply], "Which books are in my library?")
    assert decision.route == "BOOK" and len(decision.book_ids) == 3
    assert decision.reason.startswith("Question about the library itself")
    assert server.requests == [] and budget.calls == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"choices": [{"message": "BOOK"}]}, "message is str, not an object"),
        ({"choices": [{"message": {"content": ["BOOK"]}}]}, "content is list, not a string"),
        ({"choices": [{"message": {"content": "", "tool_calls": {"a": 1}}}]}, "tool_calls is dict"),
    ],
)
def test_a_malformed_llm_reply_shape_falls_back_with_a_note(
    fairytale_library: Path, body: dict, named: str
) -> None:
    (decision,), _, budget = _llm_routes(
        fairytale_library, [Reply(body=json.dumps(body))], "What did Peter Rabbit lose in the garden?"
    )
    assert decision.route == "BOOK" and decision.reason.startswith("LLM router failed")
    assert named in decision.reason
    assert budget.calls == ["llm"]


def test_invalid_llm_route_falls_back_to_the_deterministic_router(fairytale_library: Path) -> None:
    bad = {"route": "SOMEWHERE", "confidence": 0.8, "suggested_queries": []}
    (decision,), _, budget = _llm_routes(
        fairytale_library, [bad], "What did Peter Rabbit lose in the garden?"
    )
    assert decision.route == "BOOK" and decision.reason.startswith("LLM router failed")
    assert budget.calls == ["llm"]


def test_malformed_llm_json_is_repaired_once_then_falls_back(fairytale_library: Path) -> None:
    (decision,), server, budget = _llm_routes(
        fairytale_library, ["not json at all", "still not json"], "What did Peter Rabbit lose in the garden?"
    )
    assert decision.route == "BOOK" and "invalid JSON answer after one repair" in decision.reason
    assert budget.calls == ["llm", "llm"] and len(server.requests) == 2


def test_llm_ambiguous_route_is_resolved_by_the_concept_map(fairytale_library: Path) -> None:
    reply = {"route": "AMBIGUOUS", "confidence": 0.4, "suggested_queries": []}
    (decision,), _, budget = _llm_routes(fairytale_library, [reply], "Tell me about Peter Rabbit")
    assert decision.route == "BOOK"
    assert budget.calls == ["llm", "book_concept_map.lookup"]


def test_server_error_falls_back_to_the_deterministic_router(fairytale_library: Path) -> None:
    (decision,), _, _ = _llm_routes(
        fairytale_library, [Reply.fail(500)], "What did Peter Rabbit lose in the garden?"
    )
    assert (
        decision.route == "BOOK" and "LLM router failed" in decision.reason and "HTTP 500" in decision.reason
    )


def test_definitional_question_is_not_book_on_common_words_alone() -> None:
    from folio.nodes.core.types import BookInfo
    from folio.nodes.query.routing import BOOK_MIN_SIGNAL, _book_signal

    book = BookInfo("sherlock", "The Adventures of Sherlock Holmes", "Arthur Conan Doyle")
    chunk = "Our gas was lit; the noble lord had a smear of ink upon his finger."
    signal, why = _book_signal(book, "What is a noble gas?", None, chunk)
    assert signal < BOOK_MIN_SIGNAL and "definitional" in why
    plain, _ = _book_signal(book, "Why was the gas lit for the noble lord?", None, chunk)
    assert plain >= BOOK_MIN_SIGNAL  # the same words in a non-definitional question still count
