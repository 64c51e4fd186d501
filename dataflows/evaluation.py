"""``folio eval``: the evaluation DAG (``nodes.evaluation``) run over a library with a search config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dataflows.api import _config, _library
from dataflows.drivers import build_driver, search_driver
from dataflows.library import Library
from nodes import evaluation
from nodes.backends.book_store import BookStore
from nodes.types import FolioError, Hit


def stores_by_file(lib: Library) -> dict[str, BookStore]:
    """Ingested books keyed by their source file name (how question files name their book)."""
    return {Path(b["source_file"]).name: lib.store(b["book_id"]) for b in lib.descriptors()}


def evaluate_file(
    qa_file: str | Path,
    library: str | Path | Library | None = None,
    mode: str | None = None,
    k: int = 10,
    config: str | Path | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Metrics and per-question details for a question file against an ingested library."""
    lib = _library(library)
    overrides: dict[str, Any] = {"search_k": max(int(k), 10)}
    if mode:
        overrides["search_mode"] = mode
    cfg = _config(config, overrides)
    searcher_driver = search_driver(cfg)
    stores = stores_by_file(lib)
    if not stores:
        raise FolioError(str(lib.path), "the library has no books yet: run `folio ingest PATH` first")

    def searcher(question: str, store: BookStore) -> Sequence[Hit]:
        out = searcher_driver.execute(
            ["search_results"], inputs={"query": question, "book_stores": (store,), "chapter_ids": None}
        )
        return out["search_results"]

    dr = build_driver((evaluation,), cfg)
    result = dr.execute(
        ["eval_metrics", "eval_records"],
        inputs={"qa_file": str(qa_file), "stores_by_file": stores, "searcher": searcher},
    )
    metrics = dict(result["eval_metrics"])
    metrics["details"] = [
        {"qid": r.qid, "question": r.question, "located": r.located, "rank": r.rank, "latency_ms": r.latency_ms}
        for r in result["eval_records"]
    ]
    return metrics
