"""The Kiwix query dataflow: question -> books -> candidates -> scores -> each surviving book's passage
(the part of its best article that answers, with its section and URL; ``nodes/kiwix/fusion.py``).
This DAG loads no model: its passages are chosen by the question's words (the ask graph adds meaning).

``kiwix_answer`` runs the Kiwix DAG (``dataflows.asking.query_driver(config, "kiwix")``: the same
Kiwix nodes the ask graph holds, ``nodes.query.llm_connection``, ``nodes.kiwix.candidates``,
``nodes.kiwix.disambiguation``,
``nodes.kiwix.scoring`` and ``nodes.kiwix.fusion``) for a config (``dataflows.config.load_config``) with
``kiwix_query`` as its input, and returns its output, a ``KiwixResult``; ``folio kiwix QUERY (--zim
PATH... | --kiwix-url URL) [--config FILE] [--json]`` prints it.

``kiwix_bench(data_dir)`` measures both question sets (``tests/qa/kiwix_questions.jsonl``, the
development set the search heuristics were tuned on, and ``kiwix_questions_heldout.jsonl``, written
before those changes and never tuned on): top-1/top-5 of the engine alone and of the pipeline, with
and without the right ZIM given; and query latency p50/p95 per backend (libzim in-process, and http
through a kiwix-serve it starts on 127.0.0.1 and stops by PID).

Metrics: ``top1`` is exact (the gold book and path); ``top1_equivalent`` also accepts at rank 1 an
article with the gold article's title from another loaded archive (an older edition of the same
Wikipedia selection holds the same article). Older editions are searched only where the newest finds
nothing, fails or is damaged (``superseded_books``, ``nodes/kiwix/candidates.py``), so with the
question ZIMs the two mostly agree; both are reported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from hamilton import driver

from folio.dataflows.asking import query_driver
from folio.dataflows.config import load_config
from folio.dataflows.registry import settings_inputs
from folio.nodes.core.kiwix_types import KiwixResult
from folio.nodes.core.types import FolioError

__all__ = ["KiwixResult", "kiwix_answer", "kiwix_backend", "kiwix_config", "kiwix_driver", "run_kiwix_driver"]


def kiwix_config(
    config: Mapping[str, Any] | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
) -> dict[str, Any]:
    """The driver config: ``config`` (default: ``load_config()``) with the given ZIMs or server applied."""
    cfg = dict(config) if config is not None else load_config()
    if zim_paths:
        cfg.update(kiwix="libzim", zim_paths=[str(p) for p in zim_paths])
    elif kiwix_url:
        cfg.update(kiwix="http", kiwix_url=kiwix_url)
    if cfg.get("kiwix") == "libzim" and not cfg.get("zim_paths"):
        raise FolioError("kiwix", "no ZIM files given (--zim PATH or zim_paths in the config)")
    if cfg.get("kiwix") == "http" and not cfg.get("kiwix_url"):
        raise FolioError("kiwix", "no kiwix-serve URL given (--kiwix-url URL or kiwix_url in the config)")
    return cfg


def kiwix_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The Kiwix query DAG for ``config`` (``dataflows.asking.query_driver(config, "kiwix")``)."""

    return query_driver(config, "kiwix")


def kiwix_backend(dr: driver.Driver, config: Mapping[str, Any]) -> Any:
    """A new backend for ``config`` (built by the DAG's own ``kiwix_backend`` node); the caller closes it."""

    return dr.execute(["kiwix_backend"], inputs=settings_inputs(dr, config))["kiwix_backend"]


def run_kiwix_driver(
    dr: driver.Driver,
    query: str,
    cache_dir: str | None = None,
    backend: Any = None,
    config: Mapping[str, Any] | None = None,
) -> KiwixResult:
    """Run a built Kiwix driver for one query with ``config``'s settings (default: the driver's own
    defaults); a given ``backend`` replaces (and is not closed by) the run, else one is opened and closed.
    ``cache_dir`` holds the LLM disambiguation cache (default: in memory, for this process)."""

    if not query.strip():
        raise FolioError("query", "empty question")
    settings = settings_inputs(dr, config) if config is not None else {}
    opened = backend if backend is not None else kiwix_backend(dr, config or {})
    inputs = {**settings, "kiwix_query": query, **({"cache_dir": cache_dir} if cache_dir else {})}
    try:
        out = dr.execute(
            ["kiwix_result", "kiwix_catalog"], inputs=inputs, overrides={"kiwix_backend": opened}
        )
        if out["kiwix_catalog"].error is not None:  # Kiwix is the only source here: its failure is the answer
            raise FolioError(*out["kiwix_catalog"].error)
        return out["kiwix_result"]
    finally:
        if backend is None:
            opened.close()


def kiwix_answer(
    query: str,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
    config: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> KiwixResult:
    """Answer context for ``query`` from ZIM files (libzim) or a kiwix-serve URL."""
    cfg = kiwix_config(config, zim_paths, kiwix_url)
    return run_kiwix_driver(kiwix_driver(cfg), query, cache_dir, config=cfg)
