"""Folio's assembly layer: config, drivers, the library directory, the Python API and the CLI.

from folio.dataflows import ingest, search, books, ask, Session
from folio.dataflows import ingest_driver, search_driver, ask_driver, load_config
from folio.dataflows import evaluate, eval_driver, run_experiment, load_experiment
from folio.dataflows import DAGS, driver_for          # the registry of the DAGs (dataflows.registry)
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
# Hamilton imports every installed plugin library it knows (sklearn, dask.dataframe, matplotlib, pandas
# extensions...) when its function modifiers load: 4-5 s of `folio books`, and matplotlib writes a font
# cache under $HOME. Folio uses none of them, so nothing is written outside the library.
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
# ONNX Runtime's native library writes a device id and a telemetry database under $HOME/.cache on import
# (the embedder: onnx variant, and usearch's import guard): off, like Hamilton's telemetry.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

_EXPORTS = {
    "ingest": "folio.dataflows.api",
    "search": "folio.dataflows.api",
    "books": "folio.dataflows.api",
    "IngestReport": "folio.dataflows.api",
    "Library": "folio.dataflows.library",
    "load_config": "folio.dataflows.config",
    "ingest_driver": "folio.dataflows.registry",
    "search_driver": "folio.dataflows.registry",
    "DAGS": "folio.dataflows.registry",
    "driver_for": "folio.dataflows.registry",
    "evaluate_file": "folio.dataflows.evaluation",
    "evaluate": "folio.dataflows.evaluation",
    "eval_driver": "folio.dataflows.evaluation",
    "run_experiment": "folio.dataflows.experiments",
    "load_experiment": "folio.dataflows.experiments",
    "ask": "folio.dataflows.asking",
    "ask_driver": "folio.dataflows.asking",
    "Session": "folio.nodes.backends.book_tools",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import lazily, so ``folio --help`` stays fast."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
