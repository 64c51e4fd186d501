"""The DAG registry: one builder, switches apart from settings, defaults in signatures, cache rules."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import ModuleType

import pytest
import yaml

from folio.dataflows import registry
from folio.dataflows.config import ASSEMBLY_KEYS, DEFAULT_CONFIG, SWITCHES, config_files, load_config
from folio.dataflows.registry import DAGS, dag_switches, driver_for, execute, settings_inputs

CONFIGS = config_files()
DEFAULTS = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))


def _node_functions(module: ModuleType) -> Iterator[tuple[str, inspect.Signature]]:
    """(function name, signature) of every node function a module defines (public, its own)."""
    for name, fn in vars(module).items():
        if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_"):
            yield name, inspect.signature(fn)


def _parameters() -> dict[str, list[tuple[str, str, object]]]:
    """Parameter name → (module, function, default or ``inspect.Parameter.empty``) over every DAG module."""
    out: dict[str, list[tuple[str, str, object]]] = {}
    modules = {m for dag in DAGS.values() for m in dag.modules}
    for module in sorted(modules, key=lambda m: m.__name__):
        short = module.__name__.rsplit(".", 1)[-1]
        for fn_name, sig in _node_functions(module):
            for p in sig.parameters.values():
                out.setdefault(p.name, []).append((short, fn_name, p.default))
    return out


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
@pytest.mark.parametrize("dag", sorted(DAGS))
def test_every_dag_builds_for_every_config_with_only_switches_in_its_driver_config(dag, path):
    config = load_config(path, environ={})
    dr = driver_for(dag, config)
    assert {v.name for v in dr.list_available_variables()} >= set(DAGS[dag].outputs)
    assert set(dr.config) <= SWITCHES, sorted(set(dr.config) - SWITCHES)
    assert dr.config == dag_switches(dag, config)


def test_every_config_when_key_of_every_dag_is_a_switch():
    for dag in DAGS.values():
        assert dag.switch_keys <= SWITCHES, (dag.name, sorted(dag.switch_keys - SWITCHES))


def test_every_setting_of_the_defaults_has_the_same_default_in_every_node_signature():
    wrong = []
    for key, uses in _parameters().items():
        if key not in DEFAULTS or key in SWITCHES:
            continue
        for module, fn, default in uses:
            same = default == DEFAULTS[key] or (
                isinstance(default, (list, tuple)) and list(default) == DEFAULTS[key]
            )  # a sequence default is a tuple in the signature (immutable), a list in YAML
            if default is inspect.Parameter.empty or not same:
                wrong.append(f"{module}.{fn}({key}={default!r}) but default.yaml says {DEFAULTS[key]!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_key_is_a_switch_a_node_input_or_read_by_the_assembly_layer(path):
    params = set(_parameters())
    config = load_config(path, environ={})
    unused = sorted(k for k in config if k not in SWITCHES and k not in params and k not in ASSEMBLY_KEYS)
    assert not unused, f"{path.name}: keys nobody reads: {unused}"
    assert set(DEFAULTS) >= ASSEMBLY_KEYS


def test_drivers_are_memoised_per_switches_not_per_settings(tmp_path, monkeypatch):
    base = load_config(environ={})
    assert driver_for("search", base) is driver_for("search", {**base, "search_k": 3, "hybrid_rrf_k": 9})
    assert driver_for("search", base) is not driver_for("search", {**base, "search_mode": "lexical"})
    assert driver_for("ingest", base) is driver_for("ingest", {**base, "search_mode": "lexical"})
    cached = driver_for("ingest", base, cache_library=tmp_path)
    assert cached is not driver_for("ingest", base)
    monkeypatch.chdir(tmp_path.parent)
    assert cached is driver_for("ingest", base, cache_library=tmp_path.name)  # the same library, relative


def test_settings_reach_the_nodes_as_inputs_and_none_leaves_the_signature_default():
    config = load_config(overrides={"chunk_tokens": None, "chunk_profile": "technical"}, environ={})
    dr = driver_for("ingest", config)
    inputs = settings_inputs(dr, config)
    assert inputs["chunk_profile"] == "technical" and "chunk_tokens" not in inputs
    assert not set(inputs) & SWITCHES
    assert "search_k" not in inputs  # not an input of the ingest graph
    out = execute("ingest", config, ["chunk_size"])
    assert out["chunk_size"] == 512
    assert execute("ingest", {**config, "chunk_tokens": 300}, ["chunk_size"])["chunk_size"] == 300


def test_the_public_shortcuts_pass_their_config_settings():
    config = load_config(overrides={"chunk_profile": "poetry"}, environ={})
    dr = registry.ingest_driver(config)
    assert dr.execute(["chunk_size"])["chunk_size"] == 1024
    assert dr.execute(["chunk_size"], inputs={"chunk_profile": "technical"})["chunk_size"] == 512
    assert dr.driver is driver_for("ingest", config)


def test_ingest_declares_its_never_cached_nodes_and_no_node_module_decorates_caching():
    assert set(DAGS["ingest"].never_cached) == {
        "parsed_book",
        "encoder",
        "llm_connection",  # the concept map's LLM (``concept_map_llm: openai``)
        "llm_client",
        "lexical_index",
        "vector_index",
        "concept_map_file",
        "staged_book",
    }
    config = load_config(environ={})
    with_llm = {**config, "llm": "openai", "concept_map_llm": "openai"}  # the LLM's nodes exist only then
    for dag in DAGS.values():
        nodes = {
            v.name for c in (config, with_llm) for v in driver_for(dag.name, c).list_available_variables()
        }
        assert set(dag.never_cached) <= nodes, dag.name
    for name in (
        "ingest.parsing",
        "ingest.chunking",
        "search.encoding",
        "ingest.embedding",
        "ingest.lexical",
        "ingest.vectors",
        "ingest.staging",
        "search.retrieval",
    ):
        source = inspect.getsource(registry.importlib.import_module(f"folio.nodes.{name}"))
        assert "@cache(" not in source, name


def test_search_dag_holds_only_what_search_results_needs():
    for mode in ("lexical", "semantic", "hybrid", "bm25s", "dense_exact"):
        dr = driver_for("search", load_config(overrides={"search_mode": mode}, environ={}))
        computed = {v.name for v in dr.list_available_variables() if not v.is_external_input}
        assert not computed & {"window_vectors", "chunk_vectors", "windows", "chunks"}, mode
