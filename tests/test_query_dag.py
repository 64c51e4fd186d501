"""The query DAGs are one Hamilton graph each: Kiwix inside the ask graph, nothing unconsumed, one LLM
client, switches apart from settings, resources made once."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from folio.dataflows.asking import ask_config, query_driver, shared_resources
from folio.dataflows.config import SWITCHES, load_config, settings
from folio.dataflows.library import Library
from folio.dataflows.registry import settings_inputs
from folio.nodes.backends.book_tools import Session, ToolBudget
from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.core.types import NOT_FOUND, SourceResult
from folio.nodes.query.llm_connection import llm_client__openai
from folio.nodes.query.source_fusion import kiwix_query__kiwix
from tests.conftest import ZIMS
from tests.servers import ScriptedLLMServer, dead_url

WIKI = ZIMS / "wikipedia_en_100_mini_2022-10.zim"
OUTPUTS = {"ask": ("answer",), "kiwix": ("kiwix_result",)}
KIWIX_STAGES = {
    "routes",
    "source_plan",
    "kiwix_query",
    "search_terms",
    "book_searches",
    "selected_books",
    "disambiguation_candidates",
    "kiwix_candidates",
    "scored_candidates",
    "kiwix_context",
    "kiwix_result",
    "kiwix_results",
    "source_results",
    "fused_context",
}
VARIANTS = [
    {"llm": "none"},
    {"llm": "openai"},
    {"llm": "openai", "answer_mode": "agent"},
    {"llm": "openai", "answer_summaries": True},
    {"llm": "none", "kiwix": "http"},
    {"llm": "none", "kiwix": "none"},
]


def upstream(dr: Any, outputs: tuple[str, ...]) -> set[str]:
    names = set(outputs)
    for out in outputs:
        names |= {v.name for v in dr.what_is_upstream_of(out)}
    return names


def test_ask_graph_holds_the_kiwix_stages_upstream_of_the_answer() -> None:
    dr = query_driver(ask_config(None, zim_paths=[WIKI]), "ask")
    assert upstream(dr, ("answer",)) >= KIWIX_STAGES
    assert "external_sources" not in {v.name for v in dr.list_available_variables()}


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("dag", ["ask", "kiwix"])
def test_no_node_is_left_unconsumed(dag: str, overrides: dict[str, Any]) -> None:
    if dag == "kiwix" and overrides.get("kiwix") == "none":
        pytest.skip("kiwix: none has no Kiwix DAG")
    dr = query_driver(load_config(overrides=overrides), dag)
    functions = {v.name for v in dr.list_available_variables() if not v.is_external_input}
    assert functions - upstream(dr, OUTPUTS[dag]) == set()


def test_kiwix_none_leaves_every_kiwix_node_out() -> None:
    dr = query_driver(load_config(overrides={"kiwix": "none"}), "ask")
    names = {v.name for v in dr.list_available_variables()}
    assert not names & {"kiwix_backend", "search_terms", "scored_candidates", "kiwix_context", "kiwix_query"}
    assert {"kiwix_ready", "kiwix_results", "fused_context", "answer"} <= names


def test_one_llm_client_serves_router_kiwix_and_answerer() -> None:
    dr = query_driver(load_config(overrides={"llm": "openai"}), "ask")
    names = {v.name for v in dr.list_available_variables()}
    assert "kiwix_llm" not in names
    users = {v.name for v in dr.list_available_variables() if "llm_client" in v.required_dependencies}
    assert users == {"routes", "selected_books", "disambiguation_candidates", "book_results", "book_tools"}
    assert {v.name for v in dr.what_is_upstream_of("llm_client")} >= {"llm_connection", "tool_budget"}


def test_llm_client_spends_the_budget_on_a_shared_connection() -> None:
    with ScriptedLLMServer([{"books": []}, {"books": []}]) as server:
        connection = OpenAIChatClient(server.url, "m", max_retries=0)
        budget = ToolBudget(1)
        client = llm_client__openai(connection, budget)
        assert client._client is connection._client  # the same HTTP connections
        client.chat_json([{"role": "user", "content": "q"}], {"type": "object", "required": ["books"]})
        assert budget.calls == ["llm"]
        with pytest.raises(Exception, match="budget"):
            client.chat_json([{"role": "user", "content": "q"}], {"type": "object", "required": ["books"]})
        assert llm_client__openai(connection) is connection  # the Kiwix DAG alone has no budget
        connection.close()


@pytest.mark.parametrize("dag", ["ask", "kiwix"])
def test_only_switches_reach_with_config(dag: str) -> None:
    cfg = load_config(overrides={"llm": "openai", "kiwix_max_books": 3, "fusion_timeout_seconds": 2.0})
    dr = query_driver(cfg, dag)
    assert set(dr.graph.config) <= SWITCHES
    assert "kiwix_max_books" not in dr.graph.config and "llm_model" not in dr.graph.config


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_setting_defaults_in_the_signatures_equal_the_default_config(overrides: dict[str, Any]) -> None:
    defaults = settings(load_config(environ={}))
    cfg = load_config(overrides=overrides, environ={})
    for dag in ("ask", "kiwix") if cfg["kiwix"] != "none" else ("ask",):
        dr = query_driver(cfg, dag)
        nodes = {v.name for v in dr.list_available_variables() if not v.is_external_input}
        for var in dr.list_available_variables():
            for fn in var.originating_functions or ():
                for name, param in inspect.signature(fn).parameters.items():
                    if name not in defaults or name in nodes:
                        continue
                    assert param.default is not inspect.Parameter.empty, (fn.__name__, name)
                    got = list(param.default) if isinstance(param.default, tuple) else param.default
                    assert got == defaults[name], (fn.__name__, name)


def test_kiwix_query_joins_the_clauses_routed_to_kiwix() -> None:
    plan = (("book", "who is ahab"), ("kiwix", "what is neon"), ("web", "what is neon"), ("kiwix", "why"))
    assert kiwix_query__kiwix(plan, (), True) == "what is neon and why"
    assert kiwix_query__kiwix((("book", "who is ahab"),), (), True) == ""


def test_kiwix_is_also_asked_the_book_clauses_the_books_refused() -> None:
    plan = (("book", "when does the moon block out the sun"), ("kiwix", "what is neon"))
    refused = SourceResult("book", "Grimm", f"{NOT_FOUND}\nSearched:\n- text_search(...)", clause=plan[0][1])
    answered = SourceResult("book", "Grimm", "The moon rose. [1]", clause=plan[0][1])
    both = "what is neon and when does the moon block out the sun"
    assert kiwix_query__kiwix(plan, (refused,), True) == both
    assert kiwix_query__kiwix(plan, (answered,), True) == "what is neon"
    # not when Kiwix has no book to search, or is not among the enabled sources
    assert kiwix_query__kiwix(plan, (refused,), False) == "what is neon"
    assert kiwix_query__kiwix(plan, (refused,), True, ("book",)) == "what is neon"


def run_answer(cfg: dict[str, Any], library: Path, question: str) -> Any:
    lib = Library(library)
    stores = {b["book_id"]: lib.store(b["book_id"]) for b in lib.descriptors()}
    dr = query_driver(cfg, "ask")
    inputs = {
        **settings_inputs(dr, cfg),
        "question": question,
        "book_stores": stores,
        "concept_maps": {b: lib.concept_map(b) for b in stores},
        "encoder": None,
        "session": Session(),
    }
    return dr.execute(["answer"], inputs=inputs, overrides=shared_resources(cfg, dr))["answer"]


def test_one_execute_answers_from_kiwix_and_from_the_book(alice_library: Path) -> None:
    cfg = ask_config({"llm": "none", "search_mode": "lexical"}, zim_paths=[WIKI])
    kiwix = run_answer(cfg, alice_library, "What is a noble gas?")
    assert (kiwix.route, kiwix.sources_used) == ("NOT_BOOK", ("kiwix",))
    cited = kiwix.citations[0].as_dict()
    assert "noble gas" in str(cited.pop("quote")).lower()  # the passage, for the page to mark
    assert cited == {
        "zim": WIKI.stem,
        "path": "A/Noble_gas",
        "title": "Noble gas",
        "section": "",
        "url": f"zim://{WIKI.stem}/A/Noble_gas",
    }
    book = run_answer(cfg, alice_library, "What was written on the little bottle Alice found?")
    assert (book.route, book.sources_used) == ("BOOK", ("book",))
    assert {c.kind for c in book.citations} == {"book"} and "drink me" in book.answer.lower()


def test_libzim_without_zim_files_gives_no_kiwix_result(alice_library: Path) -> None:
    cfg = ask_config({"llm": "none", "search_mode": "lexical"})
    assert cfg["kiwix"] == "libzim" and not cfg["zim_paths"]
    answer = run_answer(cfg, alice_library, "What is a noble gas?")
    assert "kiwix" not in answer.sources_used
    assert (
        "no other source is configured or reachable for a question outside the books: searched the books"
        in answer.notes
    )


def test_resources_are_made_once_per_process() -> None:
    cfg = ask_config({"llm": "openai"}, zim_paths=[WIKI])
    first = shared_resources(cfg, query_driver(cfg, "ask"))
    again = shared_resources(dict(cfg), query_driver(cfg, "ask"))
    assert set(first) == {"kiwix_backend", "llm_connection"}
    assert all(first[name] is again[name] for name in first)
    other = shared_resources({**cfg, "zim_paths": [str(WIKI), str(WIKI)]}, query_driver(cfg, "ask"))
    assert other["kiwix_backend"] is not first["kiwix_backend"]


@pytest.mark.parametrize("question", ["Who is the White Rabbit?", "What is a noble gas?"])
def test_a_kiwix_serve_that_is_down_leaves_the_books_answering_with_a_note(
    alice_library: Path, question: str
) -> None:
    cfg = ask_config({"llm": "none", "search_mode": "lexical", "kiwix": "http", "kiwix_url": dead_url()})
    answer = run_answer(cfg, alice_library, question)
    assert "kiwix" not in answer.sources_used
    assert any(n.startswith("kiwix: ") and "cannot connect" in n for n in answer.notes), answer.notes
    if "Rabbit" in question:
        assert answer.sources_used == ("book",) and answer.citations
