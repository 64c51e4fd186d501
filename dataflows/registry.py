"""The one registry of Folio's DAGs: for each of ingest, library, search, kiwix, ask and eval, its node
modules, its outputs, the nodes it never caches, and one way to build its Hamilton driver.

    from folio.dataflows.registry import DAGS, driver_for, execute
    dr = driver_for("search", load_config())          # memoised per (dag, switches, cache library)
    execute(
        "search", config, ["search_results"], inputs={"query": ..., "book_stores": ..., "chapter_ids": None}
    )

Switches apart from settings: only the variant switches of a config (``config.switches``) that the DAG's
``@config.when`` functions read go to Hamilton's ``with_config``; every other key is a *setting*, a node
input with a default in its signature, passed at execute time (``settings_inputs``/``execute``). So one
built driver serves every config with the same switches, and a sweep over a number never rebuilds a
graph.

Cache behaviour is declared here once: a DAG run with a ``cache_library`` caches every node in that
library's store (``dataflows.caching``) except its ``never_cached`` nodes (clients, writers and the
file reader that notices an edited book), which always run.

The CLI, the Python API, ``folio viz``, the bench and the tests iterate ``DAGS``. ``ingest_driver`` and
``search_driver`` are the public shortcuts of the README: drivers bound to one config, whose
``execute`` passes that config's settings.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver, lifecycle
from hamilton.execution import executors

from folio.dataflows.caching import cache_dir, stores
from folio.dataflows.config import settings, switches
from folio.nodes.core.types import FolioError


@dataclass(frozen=True)
class Dag:
    """One DAG: its name, what it does, its node modules (imported on first use) and its outputs.

    ``never_cached``: nodes that always run when the DAG caches (clients, writers, the source reader).
    ``parallel``: the DAG uses ``Parallelizable``/``Collect`` (dynamic execution on an executor).
    ``switched_modules``: (switch, value, modules) — those modules leave the graph when the config's
    switch has that value (``kiwix: none`` takes the Kiwix stages out of the ask graph).
    ``refused``: (switch, value, reason) — a config this DAG cannot run with (a one-line ``FolioError``).
    """

    name: str
    description: str
    module_names: tuple[str, ...]
    outputs: tuple[str, ...]
    never_cached: tuple[str, ...] = ()
    parallel: bool = False
    switched_modules: tuple[tuple[str, Any, tuple[str, ...]], ...] = ()
    refused: tuple[tuple[str, Any, str], ...] = ()

    @property
    def modules(self) -> tuple[ModuleType, ...]:
        """Every node module the DAG may hold (whatever the switches)."""
        return tuple(importlib.import_module(f"folio.nodes.{m}") for m in self.module_names)

    def modules_for(self, config: Mapping[str, Any]) -> tuple[ModuleType, ...]:
        """The node modules of the DAG for ``config``'s switches."""
        for switch, value, reason in self.refused:
            if config.get(switch) == value:
                raise FolioError(switch, f"{switch}: {value} — {reason}")
        left_out = {
            m for switch, value, ms in self.switched_modules if config.get(switch) == value for m in ms
        }
        return tuple(
            importlib.import_module(f"folio.nodes.{m}") for m in self.module_names if m not in left_out
        )

    @property
    def switch_keys(self) -> frozenset[str]:
        """The config keys its ``@config.when`` functions (and module switches) read: all its builder hands
        Hamilton."""
        return _switch_keys(self.module_names) | {s for s, _, _ in self.switched_modules}


@functools.cache
def _switch_keys(module_names: tuple[str, ...]) -> frozenset[str]:
    keys: set[str] = set()
    for name in module_names:
        module = importlib.import_module(f"folio.nodes.{name}")
        for fn in vars(module).values():
            if callable(fn) and getattr(fn, "__module__", None) == module.__name__:
                for resolver in getattr(fn, "resolve", ()):
                    keys.update(resolver.required_config() or ())
                    keys.update(resolver.optional_config() or {})
    return frozenset(keys)


def dag_switches(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The switches of ``config`` that select variants of DAG ``name`` (what its ``with_config`` gets)."""
    return {k: v for k, v in switches(config).items() if k in DAGS[name].switch_keys}


DAGS: dict[str, Dag] = {
    d.name: d
    for d in (
        Dag(
            "ingest",
            "one book: source file → manifest → chunks → indexes → concept map → staged book",
            (
                "query.llm_connection",  # the concept map's LLM pass (``concept_map_llm: openai`` only)
                "ingest.parsing",
                "ingest.chunking",
                "search.encoding",
                "ingest.embedding",
                "ingest.lexical",
                "ingest.vectors",
                "ingest.concepts",
                "ingest.staging",
            ),
            ("staged_book",),
            # the reader notices an edited file; the encoder is a client; the rest write the staging dir
            never_cached=(
                "parsed_book",
                "encoder",
                "llm_connection",
                "llm_client",
                "lexical_index",
                "vector_index",
                "concept_map_file",
                "staged_book",
            ),
            switched_modules=(("concept_map_llm", "none", ("query.llm_connection",)),),
        ),
        Dag(
            "library",
            "many books in parallel (local pool or Dask)",
            ("ingest.collection",),
            ("book_outcomes",),
            parallel=True,
        ),
        Dag(
            "search",
            "query → lexical / semantic hits → fused results",
            ("search.encoding", "search.retrieval"),
            ("search_results",),
            never_cached=("encoder", "lexical_search"),
        ),
        Dag(
            "kiwix",
            "question → search terms → candidates → disambiguation → scores → books → multi-book context",
            (
                "query.llm_connection",
                "kiwix.candidates",
                "kiwix.disambiguation",
                "kiwix.scoring",
                "kiwix.fusion",
            ),
            ("kiwix_result",),
            refused=(("kiwix", "none", "Kiwix is turned off: use libzim or http"),),
        ),
        Dag(
            "ask",
            "question → routes → book evidence / Kiwix (disambiguate → score → select books → multi-book "
            "fuse) / web → cross-source fusion → answer",
            (
                "query.llm_connection",
                "query.routing",
                "query.book_flow",
                "query.answering",
                "kiwix.candidates",
                "kiwix.disambiguation",
                "kiwix.scoring",
                "kiwix.fusion",
                "query.source_fusion",
            ),
            ("answer",),
            switched_modules=(
                (
                    "kiwix",
                    "none",
                    ("kiwix.candidates", "kiwix.disambiguation", "kiwix.scoring", "kiwix.fusion"),
                ),
            ),
        ),
        Dag(
            "eval",
            "qa items → gold spans → retrieval records → answer checks → metrics",
            ("eval.metrics",),
            ("eval_metrics", "eval_records"),
        ),
    )
}


def build(
    name: str,
    config: Mapping[str, Any],
    cache_library: str | Path | None = None,
    *,
    adapters: Sequence[lifecycle.LifecycleAdapter] = (),
    remote_executor: executors.TaskExecutor | None = None,
) -> driver.Driver:
    """A fresh driver of DAG ``name``: its modules with ``config``'s switches (the one builder).

    ``cache_library`` caches node results in that library (all but the DAG's ``never_cached`` nodes);
    a parallel DAG runs its per-item tasks on ``remote_executor`` (default: in-process); ``adapters``
    are lifecycle hooks (the library DAG's book installer). ``driver_for`` memoises what this builds.
    """
    dag = DAGS[name]
    builder = driver.Builder().with_modules(*dag.modules_for(config)).with_config(dag_switches(name, config))
    if dag.parallel:
        builder = (
            builder.enable_dynamic_execution(allow_experimental_mode=True)
            .with_local_executor(executors.SynchronousLocalTaskExecutor())
            .with_remote_executor(remote_executor or executors.SynchronousLocalTaskExecutor())
        )
    if cache_library is not None:
        metadata_store, result_store = stores(cache_library)
        builder = builder.with_cache(
            path=str(cache_dir(cache_library)),
            metadata_store=metadata_store,
            result_store=result_store,
            recompute=list(dag.never_cached),
        )
    if adapters:
        builder = builder.with_adapters(*adapters)
    return builder.build()


_DRIVERS: dict[tuple[str, str, str | None], driver.Driver] = {}
_INPUTS: weakref.WeakKeyDictionary[driver.Driver, frozenset[str]] = weakref.WeakKeyDictionary()
_NAMES: weakref.WeakKeyDictionary[driver.Driver, frozenset[str]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _memo_key(
    name: str, config: Mapping[str, Any], cache_library: str | Path | None
) -> tuple[str, str, str | None]:
    varying = dag_switches(name, config)
    library = None if cache_library is None else str(Path(cache_library).expanduser().resolve())
    return name, json.dumps(varying, sort_keys=True, default=str), library


def driver_for(
    name: str, config: Mapping[str, Any], cache_library: str | Path | None = None
) -> driver.Driver:
    """The driver of DAG ``name`` for ``config``, memoised per (dag, its switches, cache library)."""
    key = _memo_key(name, config, cache_library)
    with _LOCK:
        if key not in _DRIVERS:
            _DRIVERS[key] = build(name, config, cache_library)
        return _DRIVERS[key]


def _external_inputs(dr: driver.Driver) -> frozenset[str]:
    names = _INPUTS.get(dr)
    if names is None:
        names = frozenset(v.name for v in dr.list_available_variables() if v.is_external_input)
        _INPUTS[dr] = names
    return names


def variable_names(dr: driver.Driver) -> frozenset[str]:
    """The names of ``dr``'s nodes and inputs (``list_available_variables``), listed once per driver."""
    names = _NAMES.get(dr)
    if names is None:
        names = frozenset(v.name for v in dr.list_available_variables())
        _NAMES[dr] = names
    return names


def settings_inputs(dr: driver.Driver, config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``config`` that ``dr``'s graph takes as inputs (to pass at execute time).

    A setting the config leaves ``None`` is left out, so the node's signature default applies.
    """
    wanted = _external_inputs(dr)
    return {k: v for k, v in settings(config).items() if k in wanted and v is not None}


def execute(
    name: str,
    config: Mapping[str, Any],
    outputs: Sequence[str],
    inputs: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cache_library: str | Path | None = None,
) -> dict[str, Any]:
    """Run DAG ``name`` for ``config``: its settings as inputs, then ``inputs`` (which win)."""
    dr = driver_for(name, config, cache_library)
    merged = {**settings_inputs(dr, config), **(inputs or {})}
    return dr.execute(list(outputs), inputs=merged, overrides=dict(overrides or {}))


class ConfiguredDriver:
    """A memoised Hamilton driver bound to one config: ``execute`` passes that config's settings first.

    Everything else (``list_available_variables``, ``display_all_functions``, ``cache``...) is the
    Hamilton driver's own (``.driver``).
    """

    def __init__(self, dr: driver.Driver, config: Mapping[str, Any]) -> None:
        self.driver = dr
        self.config = dict(config)

    def execute(
        self,
        final_vars: Sequence[str],
        overrides: Mapping[str, Any] | None = None,
        display_graph: bool = False,
        inputs: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        merged = {**settings_inputs(self.driver, self.config), **(inputs or {})}
        return self.driver.execute(
            list(final_vars), overrides=dict(overrides or {}), display_graph=display_graph, inputs=merged
        )

    def __getattr__(self, attr: str) -> Any:
        if attr == "driver":  # not set yet (unpickling): never recurse
            raise AttributeError(attr)
        return getattr(self.driver, attr)


def ingest_driver(config: Mapping[str, Any], cache_library: str | Path | None = None) -> ConfiguredDriver:
    """The per-book ingest DAG for ``config``: source file → manifest → chunks → indexes → staged book.

    ``cache_library`` turns on node-level caching in that library (re-ingest reuses unchanged work).
    """
    return ConfiguredDriver(driver_for("ingest", config, cache_library), config)


def search_driver(config: Mapping[str, Any]) -> ConfiguredDriver:
    """The search DAG for ``config``: query → lexical / semantic hits → fused results."""
    return ConfiguredDriver(driver_for("search", config), config)
