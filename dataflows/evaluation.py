"""The evaluation dataflow: the evaluation DAG (``nodes.eval.metrics``) run over a library with one config.

    from folio.dataflows.evaluation import evaluate
    run = evaluate("questions.csv", library="~/folio", config={"search_mode": "lexical"})
    run.metrics["hit@5"], run.records[0].rank

``evaluate`` builds the DAG's inputs from the config: the search DAG (``dataflows.drivers``) as the
book ``searcher``; the Kiwix DAG (``dataflows.kiwix_query``, one archive set or kiwix-serve per run,
opened only when a Kiwix question comes) as the ``kiwix_searcher``; the ask graph
(``dataflows.asking``) scoped to the question's book, to the whole library (library questions, without
Kiwix), or — a Kiwix question — the library's books with the archives, as ``folio ask --zim``, as the
``answerer``; a resolver of citations to their text
(``evidence_text``: a book citation's span is its chunk's or lies inside it, and its ``quote``, when it
has one, is the text there) and to their chunk (``cited_chunk``). ``folio eval`` and ``folio experiment``
(``dataflows.experiments``) are fronts of it; ``evaluate_file`` keeps the older dict-returning call.

Limitations: Kiwix questions need ``zim_paths`` (libzim) or ``kiwix_url`` (http) in the config; the
disambiguation cache of a run lives in a temporary folder, so runs never reuse each other's choices.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from folio.dataflows.api import resolve_config as _config
from folio.dataflows.api import resolve_library as _library
from folio.dataflows.asking import ask_driver, query_encoder, shared_resources
from folio.dataflows.kiwix_query import kiwix_backend, kiwix_config, kiwix_driver, run_kiwix_driver
from folio.dataflows.library import Library
from folio.dataflows.registry import driver_for, search_driver, settings_inputs
from folio.nodes.backends.book_store import BookStore
from folio.nodes.backends.book_tools import Session
from folio.nodes.core.types import Answer, Citation, FolioError, Hit
from folio.nodes.eval import metrics as evaluation

T = TypeVar("T")

OUTPUTS = ["eval_metrics", "eval_records"]


def eval_driver(config: Mapping[str, Any]) -> Any:
    """The evaluation DAG for ``config`` (``eval_answers`` picks the answer-check variant)."""
    return driver_for("eval", config)


@dataclass(frozen=True)
class EvalRun:
    """One question file evaluated with one config."""

    qa_file: str
    metrics: dict[str, Any]
    records: tuple[evaluation.EvalRecord, ...]

    def rows(self) -> list[dict[str, Any]]:
        """Per-question rows (the shape ``dataflows.experiment_store`` saves)."""
        import json

        out = []
        for r in self.records:
            c = r.check
            out.append(
                {
                    "question_file": Path(self.qa_file).name,
                    "qid": r.qid,
                    "question": r.question,
                    "located": r.located,
                    "rank": r.rank,
                    "latency_ms": r.latency_ms,
                    "answer": c.answer if c else None,
                    "contained": c.contained if c else None,
                    "grounded": c.grounded if c else None,
                    "unsupported": c.unsupported if c else None,
                    "tool_calls": c.tool_calls if c else None,
                    "answer_latency_ms": c.latency_ms if c else None,
                    "cited": json.dumps(list(c.cited)) if c else None,
                    "in_text": c.in_text if c else None,
                    "answer_words": c.words if c else None,
                    "first_citation_gold": c.first_gold if c else None,
                    "ask_rank": c.ask_rank if c else None,
                    "refused": c.refused if c else None,
                    "expect": (c.expect or None) if c else None,
                }
            )
        return out


def stores_by_file(lib: Library) -> dict[str, BookStore]:
    """Ingested books keyed by their source file name (how question files name their book)."""
    return {Path(b["source_file"]).name: lib.store(b["book_id"]) for b in lib.descriptors()}


class _Kiwix:
    """The Kiwix side of one run: the Kiwix DAG and one open backend, made on first use."""

    def __init__(self, cfg: Mapping[str, Any], cache_dir: str) -> None:
        self.cfg = cfg
        self.cache_dir = cache_dir
        self.driver: Any = None
        self.backend: Any = None
        self.last: dict[str, Any] = {}

    def open(self) -> Any:
        """The run's backend (the config's variant), opened on first use."""
        if self.driver is None:
            self.cfg = kiwix_config(self.cfg)
            self.driver = kiwix_driver(self.cfg)
            self.backend = kiwix_backend(self.driver, self.cfg)
        return self.backend

    def result(self, question: str) -> Any:

        self.open()
        if question not in self.last:  # the searcher and the answerer ask the same question in turn
            self.last = {
                question: run_kiwix_driver(
                    self.driver, question, self.cache_dir, backend=self.backend, config=self.cfg
                )
            }
        return self.last[question]

    def ranked(self, question: str) -> list[tuple[str, str]]:
        return [(s.candidate.book, s.candidate.path) for s in self.result(question).candidates]

    def article_text(self, book: str, path: str) -> str | None:
        self.open()
        try:
            return self.backend.article(book, path).text
        except FolioError:
            return None

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def _grounded(c: Citation, chunk: Hit, text: str) -> bool:
    """A book citation resolves to real text: its span is its chunk's (chunk citations) or lies inside it
    (sentence citations), in the chunk's chapter, and its quote, when it has one, is the text there."""
    if chunk.chapter_id != c.chapter_id or not text.strip():
        return False
    if (c.start, c.end) == (chunk.start, chunk.end):
        return text == chunk.text
    if not chunk.start <= c.start < c.end <= chunk.end:
        return False
    quote = getattr(c, "quote", "") or ""
    return not quote or " ".join(quote.split()) == " ".join(text.split())


def _citation_readers(
    by_id: Mapping[str, BookStore], kiwix: _Kiwix
) -> tuple[Callable[[Citation], Hit | None], Callable[[Citation], str | None]]:
    """``cited_chunk`` (the chunk a book citation names, None when there is none) and ``evidence_text``
    (the text a citation points at, None when it is not there or not grounded in its chunk)."""

    def cited_chunk(c: Citation) -> Hit | None:
        store = by_id.get(c.book_id)
        if c.kind != "book" or store is None:
            return None
        try:
            return store.chunk(c.chunk_id)
        except FolioError:
            return None

    def evidence_text(c: Citation) -> str | None:
        if c.kind == "kiwix":
            return kiwix.article_text(c.zim, c.path)
        chunk = cited_chunk(c)
        if chunk is None:
            return None
        try:
            text = by_id[c.book_id].chapter_text(c.chapter_id)[c.start : c.end]
        except FolioError:
            return None
        return text if _grounded(c, chunk, text) else None

    return cited_chunk, evidence_text


def _with_kiwix(cfg: Mapping[str, Any]) -> bool:
    """Whether the run's config names archives (``zim_paths`` or ``kiwix_url``): library questions are
    then asked as ``folio ask --zim`` asks them, the router choosing between the books and Kiwix."""
    return bool(cfg.get("zim_paths") or cfg.get("kiwix_url"))


@contextlib.contextmanager
def evaluation_inputs(cfg: Mapping[str, Any], lib: Library) -> Iterator[dict[str, Any]]:
    """The evaluation DAG's inputs for ``cfg`` over ``lib`` (Kiwix opened lazily, closed on exit).

    The answerer runs the ask graph: for a book question over that book alone (``kiwix: none``); for a
    library question over every book, with the run's Kiwix backend when the config names one (else
    none); for a Kiwix question as ``folio ask --zim`` would, over every book and the run's Kiwix
    backend (the router sends it to Kiwix, or to the books and then Kiwix when they refuse). None asks
    the web (``web_sources`` is empty).
    """

    stores = stores_by_file(lib)
    by_id = {s.book_id: s for s in stores.values()}
    maps = {s.book_id: lib.concept_map(s.book_id) for s in stores.values()}
    searcher_driver = search_driver(cfg)
    book_cfg: Mapping[str, Any] = {**cfg, "kiwix": "none"}
    with tempfile.TemporaryDirectory(prefix="folio-eval-") as tmp:
        kiwix = _Kiwix(cfg, tmp)

        def searcher(question: str, store: BookStore) -> Sequence[Hit]:
            out = searcher_driver.execute(
                ["search_results"],
                inputs={
                    "query": question,
                    "book_stores": (store,),
                    "chapter_ids": None,
                    "model_cache_dir": str(lib.model_cache_dir),
                },
            )
            return out["search_results"]

        def answerer(item: evaluation.QAItem, store: BookStore | None) -> Answer:
            overrides: dict[str, Any] = {"web_sources": {}}
            if store is not None:
                run_cfg = book_cfg
                encoder, _ = query_encoder(cfg, lib)
                book_stores, concept_maps = {store.book_id: store}, {store.book_id: maps[store.book_id]}
            elif item.kind == "library" and not _with_kiwix(cfg):
                run_cfg = book_cfg
                encoder, _ = query_encoder(cfg, lib)
                book_stores, concept_maps = dict(by_id), dict(maps)
            else:  # as a user asks: the library's books beside the archives, the router decides
                run_cfg = cfg
                encoder = query_encoder(cfg, lib)[0] if by_id else None
                book_stores, concept_maps = dict(by_id), dict(maps)
                overrides["kiwix_backend"] = kiwix.open()
            dr = ask_driver(run_cfg)
            inputs = {
                **settings_inputs(dr, run_cfg),
                "question": item.question,
                "book_stores": book_stores,
                "concept_maps": concept_maps,
                "encoder": encoder,
                "session": Session(),
                "cache_dir": tmp,
            }
            overrides.update(shared_resources(run_cfg, dr, ["llm_connection"]))
            return dr.execute(["answer"], inputs=inputs, overrides=overrides)["answer"]

        cited_chunk, evidence_text = _citation_readers(by_id, kiwix)
        try:
            yield {
                "stores_by_file": stores,
                "searcher": searcher,
                "kiwix_searcher": kiwix.ranked,
                "answerer": answerer,
                "evidence_text": evidence_text,
                "cited_chunk": cited_chunk,
            }
        finally:
            kiwix.close()


def spread(items: Sequence[T], n: int | None) -> tuple[T, ...]:
    """``n`` of ``items`` evenly spread over them, in order (the same ones every time); all when ``n`` is
    None or not smaller than their count."""
    if n is None or n >= len(items):
        return tuple(items)
    return tuple(items[(i * len(items)) // n] for i in range(n))


def evaluate(
    qa_file: str | Path,
    library: str | Path | Library | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    sample: int | None = None,
) -> EvalRun:
    """Run the evaluation DAG for one question file against a library with one config; ``sample``: only
    that many of its questions, evenly spread over the file (``spread``)."""
    lib = _library(library)
    cfg = _config(config, {})
    cfg["search_k"] = max(int(cfg.get("search_k") or 10), 10)
    items = spread(evaluation.qa_items(str(qa_file), _with_kiwix(cfg)), sample)
    if any(i.kind in ("book", "library") for i in items) and not lib.descriptors():
        raise FolioError(str(lib.path), "the library has no books yet: run `folio ingest PATH` first")
    dr = eval_driver(cfg)
    with evaluation_inputs(cfg, lib) as inputs:
        result = dr.execute(
            OUTPUTS, inputs={"qa_file": str(qa_file), **inputs}, overrides={"qa_items": items}
        )
    return EvalRun(str(qa_file), dict(result["eval_metrics"]), result["eval_records"])


def evaluate_file(
    qa_file: str | Path,
    library: str | Path | Library | None = None,
    mode: str | None = None,
    k: int = 10,
    config: str | Path | Mapping[str, Any] | None = None,
    answers: bool | None = None,
) -> dict[str, Any]:
    """Metrics and per-question details for a question file (``folio eval``)."""
    overrides: dict[str, Any] = {"search_k": max(int(k), 10)}
    if mode:
        overrides["search_mode"] = mode
    if answers is not None:
        overrides["eval_answers"] = bool(answers)
    cfg = _config(config, overrides)
    run = evaluate(qa_file, library, cfg)
    metrics: dict[str, Any] = dict(run.metrics)
    metrics["details"] = [{k: v for k, v in row.items() if k != "question_file"} for row in run.rows()]
    return metrics
