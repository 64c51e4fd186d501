"""``folio ask``: the query DAG (router → book flow / other sources → fusion → grounded answer).

    from folio.dataflows.asking import ask
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

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver

from folio.dataflows.config import load_config
from folio.dataflows.drivers import build_driver
from folio.dataflows.library import Library
from folio.nodes import answering, book_tools, fusion, routing
from folio.nodes.backends.tools import Session
from folio.nodes.types import Answer, Citation, ConceptMap, FolioError, SourceResult

ASK_MODULES = (routing, book_tools, answering, fusion)

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
                from folio.nodes.backends.encoder import load_encoder

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
        from folio.dataflows.kiwix_query import build_kiwix_driver, kiwix_config, run_kiwix_driver

        kiwix_dr = build_kiwix_driver(kiwix_config(cfg))

        def kiwix_source(clause: str) -> SourceResult:
            return kiwix_source_result(run_kiwix_driver(kiwix_dr, clause), clause)

        out["kiwix"] = kiwix_source
    if cfg.get("searxng_url"):
        from folio.nodes.backends.searxng import SearxngSource

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


# --- bench ----------------------------------------------------------------------------------------------
