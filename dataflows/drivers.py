"""Re-exports until the merge of issue 10: the DAG registry (``dataflows.registry``) builds every driver.

``ingest_driver`` and ``search_driver`` are the registry's. ``build_driver`` keeps its old meaning (the
whole config to ``with_config``) only for the builders that still use it (``dataflows.asking``,
``dataflows.evaluation.eval_driver``) until the query graph joins the registry; then this module goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from hamilton import driver

from folio.dataflows.caching import cache_dir, stores
from folio.dataflows.registry import ingest_driver, search_driver

__all__ = ["build_driver", "ingest_driver", "search_driver"]


def build_driver(
    modules: tuple[ModuleType, ...], config: Mapping[str, Any], cache_library: str | Path | None = None
) -> driver.Driver:
    """A fresh driver over ``modules`` with the whole ``config`` (old style; new code uses the registry)."""
    builder = driver.Builder().with_modules(*modules).with_config(dict(config))
    if cache_library is not None:
        metadata_store, result_store = stores(cache_library)
        builder = builder.with_cache(
            path=str(cache_dir(cache_library)), metadata_store=metadata_store, result_store=result_store
        )
    return builder.build()
