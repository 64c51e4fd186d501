"""``folio ask``: the query DAG (router → book flow / other sources → fusion → grounded answer).

    from dataflows.asking import ask
    answer = ask("Why does Ahab hunt the whale?", library="~/folio")
    print(answer.answer, answer.citations)

``ask_driver(config)`` builds (and memoises) the Hamilton driver over ``nodes.routing``,
``nodes.book_tools``, ``nodes.answering`` and ``nodes.fusion``; its inputs are ``question``,
``book_stores`` (book id → BookStore), ``concept_maps`` (book id → ConceptMap), ``encoder`` (or None),
``session`` (a ``Session``) and ``external_sources`` (source name → callable ``clause -> SourceResult``).
``ask`` opens the library once per process (stores, concept maps, encoder) and builds the external
sources from the config: ``kiwix`` (ZIM files or a kiwix-serve URL) and ``web``/``news`` (SearXNG).
``add_ask_parser``/``run_ask_command`` implement
``folio ask QUESTION [--library DIR] [--zim PATH... | --kiwix-url URL] [--config FILE] [--json]``;
``ask_bench`` measures latency without an LLM and the fusion overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver

from dataflows.bench import latency_summary
from dataflows.config import load_config
from dataflows.drivers import build_driver
from dataflows.library import Library
from nodes import answering, book_tools, fusion, routing
from nodes.backends.tools import Session
from nodes.types import Answer, Citation, ConceptMap, FolioError, SourceResult

ASK_MODULES = (routing, book_tools, answering, fusion)
MOBY_QUESTIONS = Path(__file__).resolve().parent.parent / "tests" / "qa" / "moby_dick_questions.jsonl"

_DRIVERS: dict[str, driver.Driver] = {}
_LIBRARIES: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Library, dict, dict]] = {}
_ENCODERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def ask_config(
    config: str | Path | Mapping[str, Any] | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
) -> dict[str, Any]:
    """The ask config: ``config`` (a file, a mapping of overrides, or the defaults) with the Kiwix source applied."""
    cfg = load_config(None, overrides=dict(config)) if isinstance(config, Mapping) else load_config(config)
    if zim_paths:
        cfg.update(kiwix="libzim", zim_paths=[str(p) for p in zim_paths])
    elif kiwix_url:
        cfg.update(kiwix="http", kiwix_url=kiwix_url)
    if cfg.get("answer_mode") not in ("pipeline", "agent"):
        raise FolioError(
            "answer_mode", f"unknown answer mode {cfg.get('answer_mode')!r}: use pipeline or agent"
        )
    if cfg.get("answer_mode") == "agent" and cfg.get("llm") != "openai":
        raise FolioError("answer_mode", "agent mode needs an LLM: set llm: openai (see configs/agent.yaml)")
    fusion._source_names(cfg.get("sources") or ["book"], int(cfg.get("fusion_max_sources") or 4))
    return cfg


def ask_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The query DAG for ``config`` (memoised per config)."""
    key = json.dumps(dict(config), sort_keys=True, default=str)
    with _LOCK:
        if key not in _DRIVERS:
            _DRIVERS[key] = build_driver(ASK_MODULES, config)
        return _DRIVERS[key]


def _library(library: str | Path | Library | None) -> tuple[Library, dict, dict]:
    """The library, its open stores and concept maps, shared per process until a book changes."""
    lib = library if isinstance(library, Library) else Library(library)
    state = tuple((b["book_id"], b.get("content_hash", "")) for b in lib.descriptors())
    key = (str(lib.path.resolve()), state)
    with _LOCK:
        if key not in _LIBRARIES:
            stores = {b: lib.store(b) for b, _ in state}
            maps: dict[str, ConceptMap | None] = {b: lib.concept_map(b) for b, _ in state}
            _LIBRARIES[key] = (lib, stores, maps)
        return _LIBRARIES[key]


def query_encoder(cfg: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The query encoder (loaded once), or None and why (lexical-only then)."""
    if cfg.get("search_mode") == "lexical":
        return None, "search_mode is lexical"
    model = str(cfg.get("embedding_model"))
    with _LOCK:
        if model not in _ENCODERS:
            try:
                from nodes.backends.encoder import load_encoder

                _ENCODERS[model] = load_encoder(model)
            except Exception as exc:  # degraded mode: lexical only
                _ENCODERS[model] = exc
    value = _ENCODERS[model]
    return (None, f"{type(value).__name__}: {value}") if isinstance(value, Exception) else (value, None)


def kiwix_source_result(result: Any, clause: str) -> SourceResult:
    """A Kiwix query result as a fusion source: its context text, labelled, with one citation per section."""
    paths = {s.candidate.url: s.candidate.path for s in result.candidates}
    citations = tuple(
        Citation(
            "kiwix", zim=s.source, path=paths.get(s.url, s.url.split("/", 3)[-1]), title=s.title, url=s.url
        )
        for s in result.context.sections
    )
    label = " + ".join(dict.fromkeys(s.title for s in result.context.sections)) or "kiwix"
    text = result.context.text or "no results found"
    return SourceResult("kiwix", label, text, citations, None, clause)


def external_sources(cfg: Mapping[str, Any]) -> dict[str, Callable[[str], SourceResult]]:
    """The configured non-book sources that can run: kiwix (ZIMs or URL), web and news (SearXNG)."""
    enabled = fusion._source_names(cfg.get("sources") or ["book"], int(cfg.get("fusion_max_sources") or 4))
    out: dict[str, Callable[[str], SourceResult]] = {}
    has_kiwix = (cfg.get("kiwix") == "libzim" and cfg.get("zim_paths")) or (
        cfg.get("kiwix") == "http" and cfg.get("kiwix_url")
    )
    if "kiwix" in enabled and has_kiwix:
        from dataflows.kiwix_query import build_kiwix_driver, kiwix_config, run_kiwix_driver

        kiwix_dr = build_kiwix_driver(kiwix_config(cfg))

        def kiwix_source(clause: str) -> SourceResult:
            return kiwix_source_result(run_kiwix_driver(kiwix_dr, clause), clause)

        out["kiwix"] = kiwix_source
    if cfg.get("searxng_url"):
        from nodes.backends.searxng import SearxngSource

        for name in ("web", "news"):
            if name in enabled:
                out[name] = SearxngSource(
                    str(cfg["searxng_url"]),
                    name,
                    float(cfg.get("searxng_timeout_seconds") or 10.0),
                    int(cfg.get("searxng_max_results") or 5),
                )
    return out


def ask(
    question: str,
    session: Session | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    library: str | Path | Library | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
    sources: Mapping[str, Callable[[str], SourceResult]] | None = None,
) -> Answer:
    """Answer ``question`` from the library's books and the configured sources, with citations.

    Args:
        question: the question, in plain words.
        session: the conversation's cache (a new one when None).
        config: a config file, a mapping of overrides, or None (defaults + environment).
        library: the library directory (default: ``$FOLIO_LIBRARY`` or the per-user data dir).
        zim_paths: ZIM files for the kiwix source; ``kiwix_url``: a kiwix-serve instead.
        sources: external sources to use instead of the configured ones (tests, embedding apps).
    """
    if not question.strip():
        raise FolioError("question", "empty question")
    cfg = ask_config(config, zim_paths, kiwix_url)
    _, stores, maps = _library(library)
    external = dict(sources) if sources is not None else external_sources(cfg)
    if not stores and not external:
        raise FolioError(
            str(Library(library).path if not isinstance(library, Library) else library.path),
            "nothing to ask: the library has no books (folio ingest PATH) and no other source is configured",
        )
    encoder, why = query_encoder(cfg)
    inputs = {
        "question": question,
        "book_stores": stores,
        "concept_maps": maps,
        "encoder": encoder,
        "session": session if session is not None else Session(),
        "external_sources": external,
    }
    result: Answer = ask_driver(cfg).execute(["answer"], inputs=inputs)["answer"]
    if why and why != "search_mode is lexical" and stores:
        result = Answer(**{**result.__dict__, "notes": (*result.notes, f"encoder unavailable: {why}")})
    return result


# --- CLI -------------------------------------------------------------------------------------------------


def add_ask_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``folio ask QUESTION [--library DIR] [--zim PATH... | --kiwix-url URL] [--config FILE] [--json]``."""
    parser = subparsers.add_parser("ask", help="answer a question from your books and Kiwix, with citations")
    parser.add_argument("question", help="the question, in plain words")
    parser.add_argument(
        "--library", default=None, help="library directory (default: $FOLIO_LIBRARY or per-user data dir)"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--zim", nargs="+", metavar="PATH", help="ZIM files to search too (libzim)")
    source.add_argument("--kiwix-url", metavar="URL", help="base URL of a kiwix-serve to search too")
    parser.add_argument("--config", metavar="FILE", help="a YAML config over configs/default.yaml")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    parser.set_defaults(func=run_ask_command)
    return parser


def _citation_line(n: int, c: Citation) -> str:
    if c.kind == "book":
        return f"[{n}] {c.chapter_title or c.chapter_id} — {c.book_id} {c.chunk_id} (chars {c.start}–{c.end})"
    if c.kind == "kiwix":
        return f"[{n}] {c.title} — zim {c.zim}, {c.path}"
    return f"[{n}] {c.title} — {c.url}"


def format_answer(result: Answer) -> str:
    """The answer as plain text: answer, citations, route line, notes."""
    lines = [result.answer, ""]
    if result.citations:
        lines.append("citations:")
        lines.extend("  " + _citation_line(i, c) for i, c in enumerate(result.citations, 1))
    lines.append(
        f"route: {result.route} · sources: {', '.join(result.sources_used) or 'none'} · tool calls: {result.tool_calls}"
    )
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def run_ask_command(args: argparse.Namespace) -> int:
    """Run ``folio ask``; a ``FolioError`` is printed as one line ``source: reason`` (exit status 1)."""
    try:
        result = ask(
            args.question,
            config=args.config,
            library=args.library,
            zim_paths=args.zim,
            kiwix_url=args.kiwix_url,
        )
    except FolioError as exc:
        print(f"{exc.source}: {exc.reason}", file=sys.stderr)
        return 1
    print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False) if args.json else format_answer(result))
    return 0


# --- bench ----------------------------------------------------------------------------------------------


def fusion_overhead(delays: Sequence[float] = (0.02, 0.05, 0.1), runs: int = 20) -> dict[str, float]:
    """Wall time of fusing sources that sleep ``delays`` seconds, minus the slowest delay (ms)."""
    from nodes.backends.tools import PendingJobs, shared_pool

    def make(i: int, delay: float) -> Callable[[str], SourceResult]:
        def source(clause: str) -> SourceResult:
            time.sleep(delay)
            return SourceResult(
                ("kiwix", "web", "news")[i % 3], f"s{i}", f"Result {i} about {clause}. It says {i}."
            )

        return source

    pool = shared_pool(12)
    overheads = []
    for _ in range(runs):
        t0 = time.perf_counter()
        pending = PendingJobs(pool, [(f"s{i}", "q", make(i, d)) for i, d in enumerate(delays)])
        done, _ = pending.collect(5.0)
        fusion._fuse_results([r for _, _, r in done], fusion.KNOWN_SOURCES, 1500)
        overheads.append((time.perf_counter() - t0 - max(delays)) * 1000)
    return latency_summary(overheads)


def ask_bench(data_dir: str | os.PathLike[str], library: str | Path | None = None) -> dict[str, Any]:
    """``folio ask`` latency without an LLM (warm, FairytaleQA Potter questions) and the fusion overhead.

    Ingests the Potter treasury into a temporary library unless ``library`` already holds it.
    """
    import csv
    import tempfile

    data = Path(data_dir)
    book = data / "books/txt/pg572_potter_great-big-treasury.txt"
    with open(data / "qa/fairytaleqa/questions.csv", encoding="utf-8", newline="") as f:
        questions = [r["question"] for r in csv.DictReader(f) if r["book_file"].endswith(book.name)][:100]
    tmp = None
    if library is None:
        from dataflows.api import ingest

        tmp = tempfile.TemporaryDirectory(prefix="folio-ask-bench-")
        library = tmp.name
        report = ingest([book], library=library)
        if not report.ok:
            raise FolioError(str(book), "; ".join(str(e) for e in report.errors))
    try:
        cfg = {"llm": "none"}
        ask(questions[0], config=cfg, library=library)  # warm: driver, stores, encoder
        latencies = []
        for q in questions:
            t0 = time.perf_counter()
            ask(q, config=cfg, library=library)
            latencies.append((time.perf_counter() - t0) * 1000)
        return {
            "questions": len(questions),
            "ask_warm_no_llm": latency_summary(latencies),
            "fusion_overhead_over_slowest_source": fusion_overhead(),
        }
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":  # pragma: no cover - manual benchmark
    print(json.dumps(ask_bench(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"), indent=2))
