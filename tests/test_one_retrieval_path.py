"""One retrieval path (issue 27): ``folio search``, the ask book flow (``book_hits``), the agent's book
tools, HTTP ``/api/search``, the MCP ``search`` tool and the eval's searcher rank the same hits for the
same query, scope and config (real Alice book)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from folio.dataflows import api
from folio.dataflows.asking import _library, ask_config, ask_driver, query_encoder
from folio.dataflows.config import load_config
from folio.dataflows.evaluation import evaluation_inputs
from folio.dataflows.mcp_server import tool_specs
from folio.dataflows.registry import settings_inputs
from folio.dataflows.server import create_app
from folio.dataflows.service import Service
from folio.nodes.backends.book_tools import Session, ToolBudget
from folio.nodes.core.ranking import search_text
from tests.servers import ServedApp

QUERIES = (
    "What did the White Rabbit take out of its waistcoat-pocket?",
    "Why did Alice cry so much that she made a pool?",
    "the Queen of Hearts and her tarts",
)


def _keys(rows) -> list[tuple[str, str]]:
    return [
        (r["book_id"], r["location_id"].split("/", 1)[1] if "location_id" in r else r["chunk_id"])
        if isinstance(r, dict)
        else (r.book_id, r.chunk_id)
        for r in rows
    ]


def _ask_graph(library: Path, config: dict, question: str) -> tuple[str, list, object]:
    """The ask graph's ``book_hits`` for ``question`` and its ``book_tools`` (the agent's tools)."""
    cfg = ask_config(config)
    lib, stores, maps = _library(library)
    encoder, _ = query_encoder(cfg, lib)
    dr = ask_driver(cfg)
    inputs = {
        **settings_inputs(dr, cfg),
        "question": question,
        "book_stores": stores,
        "concept_maps": maps,
        "encoder": encoder,
        "session": Session(),
    }
    out = dr.execute(["book_hits", "book_tools"], inputs=inputs)
    (found,) = out["book_hits"]
    tools = out["book_tools"]
    tools.budget = ToolBudget(8)  # the agent's own turn: the graph spent the question's budget
    return found.question, list(found.hits), tools


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_the_front_ends_rank_the_same_hits(alice_library: Path, tmp_path: Path, fusion: str) -> None:
    library = tmp_path / "library"
    shutil.copytree(alice_library, library)
    config = {"kiwix": "none", "scope_boost": 0.0, "hybrid_fusion": fusion, "search_k": 8}
    cfg = load_config(overrides=config)
    service = Service(library, config=cfg)
    search_tool = next(s for s in tool_specs() if s.name == "search")
    with (
        ServedApp(create_app(service)) as running,
        httpx.Client(base_url=running.url, timeout=120) as client,
        evaluation_inputs(cfg, api.resolve_library(library)) as eval_inputs,
    ):
        (store,) = eval_inputs["stores_by_file"].values()
        for question in QUERIES:
            clause, ask_hits, tools = _ask_graph(library, config, question)
            assert clause == question.rstrip("?")  # the ask searches the router's clause, without its "?"
            query = question  # typed as asked: every front end encodes it as the clause (``search_text``)
            search = _keys(api.search(query, library=library, config=cfg))
            assert len(search) == 8
            ranked = {
                "ask book_hits": _keys(ask_hits[:8]),
                "agent tool": _keys(json.loads(tools.call("search", {"query": query}))),
                "HTTP /api/search": _keys(client.get("/api/search", params={"q": query}).json()),
                "MCP search": _keys(search_tool.run(service, {"query": query})),
                "eval searcher": _keys(eval_inputs["searcher"](query, store)),
            }
            for front_end, hits in ranked.items():
                assert hits == search, f"{front_end} differs from folio search for {query!r}"


@pytest.mark.parametrize(
    "overrides",
    [{}, {"hybrid_fusion": "rrf", "hybrid_lexical_weight": 0.4, "hybrid_rrf_k": 30}],
)
def test_the_mcp_book_tools_fuse_as_the_ask_graph_does(alice_library: Path, overrides: dict) -> None:
    config = {"kiwix": "none", **overrides}
    service = Service(alice_library, config=load_config(overrides=config))
    *_, graph_tools = _ask_graph(alice_library, config, QUERIES[0])
    assert service.book_tools().fusion == graph_tools.fusion
    assert graph_tools.fusion.name == overrides.get("hybrid_fusion", "convex")


def test_a_query_is_encoded_without_its_closing_question_mark() -> None:
    assert search_text("What did the White Rabbit take out of its waistcoat-pocket?") == (
        "What did the White Rabbit take out of its waistcoat-pocket"
    )
    assert search_text("  Who  stole the tarts ? ") == "Who stole the tarts"
    assert search_text("the Queen of Hearts and her tarts") == "the Queen of Hearts and her tarts"
    assert search_text("Off with her head!") == "Off with her head!"  # the router keeps "!" too
    assert search_text("?") == "?"
