"""Driver builders: node modules + config (+ cache, executor) → Hamilton drivers.

``ingest_driver(config)`` and ``search_driver(config)`` return drivers for direct Hamilton calls
with any config (``dr.execute(["staged_book"], inputs=...)``); built drivers are memoised per config,
so a warm process pays no build time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver

from folio.nodes import chunking, concepts, embedding, lexical, parsing, retrieval, staging, vectors

INGEST_MODULES: tuple[ModuleType, ...] = (parsing, chunking, embedding, lexical, vectors, concepts, staging)
SEARCH_MODULES: tuple[ModuleType, ...] = (embedding, retrieval)

_DRIVERS: dict[tuple[str, str], driver.Driver] = {}


def _key(name: str, config: Mapping[str, Any]) -> tuple[str, str]:
    return name, json.dumps(dict(config), sort_keys=True, default=str)


def build_driver(
    modules: tuple[ModuleType, ...], config: Mapping[str, Any], cache_library: str | Path | None = None
) -> driver.Driver:
    """A fresh driver over ``modules`` with ``config`` (variant keys select ``@config.when`` nodes).

    With ``cache_library``, node results are cached in that library's diskcache (``dataflows.caching``).
    """
    builder = driver.Builder().with_modules(*modules).with_config(dict(config))
    if cache_library is not None:
        from folio.dataflows.caching import cache_dir, stores

        metadata_store, result_store = stores(cache_library)
        builder = builder.with_cache(
            path=str(cache_dir(cache_library)), metadata_store=metadata_store, result_store=result_store
        )
    return builder.build()


def ingest_driver(config: Mapping[str, Any], cache_library: str | Path | None = None) -> driver.Driver:
    """The per-book ingest DAG: source file → manifest → chunks → indexes → concept map → staged book.

    ``cache_library`` turns on node-level caching in that library (re-ingest reuses unchanged work).
    """
    key = _key(f"ingest:{cache_library}", config)
    if key not in _DRIVERS:
        _DRIVERS[key] = build_driver(INGEST_MODULES, config, cache_library)
    return _DRIVERS[key]


def search_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The search DAG: query → lexical / semantic hits → fused results."""
    key = _key("search", config)
    if key not in _DRIVERS:
        _DRIVERS[key] = build_driver(SEARCH_MODULES, config)
    return _DRIVERS[key]
