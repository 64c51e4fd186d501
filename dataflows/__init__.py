"""Folio's assembly layer: config, drivers, the library directory, the Python API and the CLI.

    from dataflows import ingest, search, books, ask, Session, ingest_driver, search_driver, ask_driver, load_config
    from dataflows import evaluate, eval_driver, run_experiment, load_experiment
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

_EXPORTS = {
    "ingest": "dataflows.api",
    "search": "dataflows.api",
    "books": "dataflows.api",
    "IngestReport": "dataflows.api",
    "Library": "dataflows.library",
    "load_config": "dataflows.config",
    "ingest_driver": "dataflows.drivers",
    "search_driver": "dataflows.drivers",
    "build_driver": "dataflows.drivers",
    "evaluate_file": "dataflows.evaluation",
    "evaluate": "dataflows.evaluation",
    "eval_driver": "dataflows.evaluation",
    "run_experiment": "dataflows.experiments",
    "load_experiment": "dataflows.experiments",
    "ask": "dataflows.asking",
    "ask_driver": "dataflows.asking",
    "Session": "nodes.backends.tools",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import lazily, so ``folio --help`` stays fast."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
