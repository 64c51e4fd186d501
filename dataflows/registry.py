"""The one registry of Folio's DAGs: for each of ingest, library, search, kiwix, ask and eval, its node
modules, its outputs, and one way to build its Hamilton driver.

    from folio.dataflows.registry import DAGS, driver_for
    dr = driver_for("ask", load_config())          # memoised per (dag, config, cache library)
    dr.execute(["answer"], inputs=...)

The CLI, the Python API, ``folio viz``, the bench and the tests iterate ``DAGS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver


@dataclass(frozen=True)
class Dag:
    """One DAG: its name, what it does, its node modules (imported on first use) and its outputs."""

    name: str
    description: str
    module_names: tuple[str, ...]
    outputs: tuple[str, ...]
    build: Callable[[Mapping[str, Any]], driver.Driver]

    @property
    def modules(self) -> tuple[ModuleType, ...]:
        import importlib

        return tuple(importlib.import_module(f"folio.nodes.{m}") for m in self.module_names)


def _ingest(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.drivers import ingest_driver

    return ingest_driver(config)


def _library(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.parallel import library_driver

    return library_driver(config)


def _search(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.drivers import search_driver

    return search_driver(config)


def _kiwix(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.kiwix_query import kiwix_driver

    return kiwix_driver(config)


def _ask(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.asking import ask_driver

    return ask_driver(config)


def _eval(config: Mapping[str, Any]) -> driver.Driver:
    from folio.dataflows.evaluation import eval_driver

    return eval_driver(config)


DAGS: dict[str, Dag] = {
    d.name: d
    for d in (
        Dag(
            "ingest",
            "one book: source file → manifest → chunks → indexes → concept map → staged book",
            ("parsing", "chunking", "embedding", "lexical", "vectors", "concepts", "staging"),
            ("staged_book",),
            _ingest,
        ),
        Dag(
            "library",
            "many books in parallel (local pool or Dask)",
            ("collection",),
            ("ingested_books",),
            _library,
        ),
        Dag(
            "search",
            "query → lexical / semantic hits → fused results",
            ("embedding", "retrieval"),
            ("search_results",),
            _search,
        ),
        Dag(
            "kiwix",
            "question → search terms → candidates → disambiguation → scores → books → multi-book context",
            ("kiwix", "disambiguation", "scoring", "fusion"),
            ("kiwix_context",),
            _kiwix,
        ),
        Dag(
            "ask",
            "question → routes → book evidence / Kiwix / web → cross-source fusion → answer",
            ("routing", "book_tools", "answering", "fusion"),
            ("answer",),
            _ask,
        ),
        Dag(
            "eval",
            "qa items → gold spans → retrieval records → answer checks → metrics",
            ("evaluation",),
            ("eval_metrics", "eval_records"),
            _eval,
        ),
    )
}


def driver_for(
    name: str, config: Mapping[str, Any], cache_library: str | Path | None = None
) -> driver.Driver:
    """The driver of DAG ``name`` for ``config``."""
    return DAGS[name].build(config)


def settings_inputs(dr: driver.Driver, config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``config`` that ``dr``'s graph takes as inputs (to pass at execute time).

    A setting the config leaves ``None`` is left out, so the node's signature default applies.
    """
    from folio.dataflows.config import settings

    wanted = {v.name for v in dr.list_available_variables() if v.is_external_input}
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
