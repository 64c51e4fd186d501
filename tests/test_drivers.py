"""Every config in configs/ builds every driver."""

import pytest

from folio.dataflows.config import config_files, load_config
from folio.dataflows.registry import ingest_driver, search_driver

CONFIGS = config_files()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_builds_the_ingest_and_search_drivers(path):
    config = load_config(path, environ={})
    ingest = {v.name for v in ingest_driver(config).list_available_variables()}
    assert {
        "parsed_book",
        "manifest",
        "chunks",
        "lexical_index",
        "window_vectors",
        "vector_index",
        "concept_map",
        "staged_book",
    } <= ingest
    search = {v.name for v in search_driver(config).list_available_variables()}
    assert "search_results" in search


def test_search_mode_selects_exactly_one_results_variant():
    for mode in ("lexical", "semantic", "hybrid"):
        dr = search_driver(load_config(overrides={"search_mode": mode}, environ={}))
        upstream = {v.name for v in dr.list_available_variables() if v.name == "search_results"}
        assert upstream == {"search_results"}
    lexical = search_driver(load_config(overrides={"search_mode": "lexical"}, environ={}))
    deps = next(
        v for v in lexical.list_available_variables() if v.name == "search_results"
    ).required_dependencies
    assert "semantic_hits" not in deps
