"""``folio ask`` and ``folio kiwix``: the query DAGs, one Hamilton graph each.

    from folio.dataflows.asking import ask
    answer = ask("Why does Ahab hunt the whale?", library="~/folio")
    print(answer.answer, answer.citations)

``query_driver(config, dag)`` is the registry's driver (``folio.dataflows.registry``, memoised per DAG
and switches) of one query DAG:

- ``ask``: ``question → routes → book flow / Kiwix (search terms → candidates → disambiguation →
  scores → selected books → multi-book context) / web and news → cross-source fusion → answer``, over
  the registry's ask modules (without the Kiwix stages for ``kiwix: none``); output ``answer``; inputs
  ``question``, ``book_stores`` (book id → BookStore), ``concept_maps`` (book id → ConceptMap),
  ``encoder`` (or None), ``session`` (a ``Session``), ``cache_dir`` (optional) and the settings.
- ``kiwix``: the Kiwix nodes alone; output ``kiwix_result``; inputs ``kiwix_query``,
  ``cache_dir`` (optional) and the settings.

Only the variant switches (``folio.dataflows.config.switches``) reach ``with_config``; the settings are
passed at execute time (``folio.dataflows.registry.settings_inputs``). ``ask`` opens the library once
per process (stores, concept maps, encoder) and hands the graph the process-wide resources
(``shared_resources``: the open ZIM archives or kiwix-serve client, the LLM connection) as Hamilton
``overrides``, so a warm ``ask`` pays no load time. One ``ask`` has one total deadline
(``ask_deadline_seconds``): a ``Deadline`` started just before the graph runs and made the active
deadline of the run (``nodes.backends.deadlines``), which fusion and every HTTP client obey.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from hamilton import driver

from folio.dataflows.config import load_config, switches
from folio.dataflows.library import Library
from folio.dataflows.registry import driver_for, execute, settings_inputs, variable_names
from folio.nodes.backends.book_tools import Session
from folio.nodes.backends.deadlines import deadline_scope
from folio.nodes.core.types import Answer, ConceptMap, Deadline, FolioError
from folio.nodes.query import source_fusion
from folio.nodes.readers.common import located_citation

KIWIX_VARIANTS = ("libzim", "http", "none")
RESOURCES = ("kiwix_backend", "llm_connection")  # expensive: created once per process, handed in

_RESOURCES: dict[tuple[str, str], Any] = {}
_LIBRARIES: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Library, dict, dict]] = {}
_ENCODERS: dict[str, Any] = {}
_LOCK = threading.RLock()


def query_driver(config: Mapping[str, Any], dag: str = "ask") -> driver.Driver:
    """The driver of query DAG ``dag`` ("ask" or "kiwix") for ``config`` (the registry's, memoised per
    switches)."""
    if dag not in ("ask", "kiwix"):
        raise FolioError("dag", f"unknown query DAG {dag!r}: use ask or kiwix")
    if config.get("kiwix") not in KIWIX_VARIANTS:
        raise FolioError(
            "kiwix", f"unknown Kiwix backend {config.get('kiwix')!r}: use {', '.join(KIWIX_VARIANTS)}"
        )
    return driver_for(dag, config)


def ask_driver(config: Mapping[str, Any]) -> driver.Driver:
    """The ask DAG for ``config`` (``query_driver(config, "ask")``)."""
    return query_driver(config, "ask")


def shared_resources(
    config: Mapping[str, Any], dr: driver.Driver, names: Sequence[str] = RESOURCES
) -> dict[str, Any]:
    """The expensive resources among ``names`` that ``dr``'s graph uses, as overrides: each built once per
    process (by its own node) for the settings it depends on, then shared by every later query."""
    present = variable_names(dr)
    settings = settings_inputs(dr, config)
    out: dict[str, Any] = {}
    for name in names:
        if name not in present:
            continue
        upstream = {v.name for v in dr.what_is_upstream_of(name) if v.is_external_input}
        inputs = {k: v for k, v in settings.items() if k in upstream}
        key = (name, json.dumps([switches(config), inputs], sort_keys=True, default=str))
        with _LOCK:
            if key not in _RESOURCES:
                _RESOURCES[key] = dr.execute([name], inputs=inputs)[name]
        out[name] = _RESOURCES[key]
    return out


def ask_config(
    config: str | Path | Mapping[str, Any] | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
) -> dict[str, Any]:
    """The ask config: ``config`` (a file, a mapping of overrides, or the defaults) with the Kiwix source
    applied."""
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
    if cfg.get("rerank") == "llm" and cfg.get("llm") != "openai":
        raise FolioError("rerank", "rerank: llm needs an LLM: set llm: openai (or rerank: cross_encoder)")
    if cfg.get("kiwix") not in KIWIX_VARIANTS:
        raise FolioError(
            "kiwix", f"unknown Kiwix backend {cfg.get('kiwix')!r}: use {', '.join(KIWIX_VARIANTS)}"
        )
    enabled = source_fusion.source_names(
        cfg.get("sources") or ["book"], int(cfg.get("fusion_max_sources") or 4)
    )
    if cfg.get("kiwix") == "http" and not cfg.get("kiwix_url") and "kiwix" in enabled:
        raise FolioError("kiwix_url", "kiwix: http needs kiwix_url (the base URL of a kiwix-serve)")
    return cfg


def other_sources(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """The enabled non-book sources ``cfg`` configures: kiwix (ZIM files or a URL), web and news (SearXNG)."""
    enabled = source_fusion.source_names(
        cfg.get("sources") or ["book"], int(cfg.get("fusion_max_sources") or 4)
    )
    kiwix_set = (cfg.get("kiwix") == "libzim" and cfg.get("zim_paths")) or (
        cfg.get("kiwix") == "http" and cfg.get("kiwix_url")
    )
    out = ["kiwix"] if "kiwix" in enabled and kiwix_set else []
    out.extend(name for name in ("web", "news") if name in enabled and cfg.get("searxng_url"))
    return tuple(out)


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


def query_encoder(cfg: Mapping[str, Any], library: Library | None = None) -> tuple[Any, str | None]:
    """The query encoder of ``cfg``'s ``embedder`` (loaded once; an ONNX model is stored in ``library``'s
    cache), or None and why (lexical-only then)."""
    if cfg.get("search_mode") == "lexical":
        return None, "search_mode is lexical"
    models = None if library is None else str(library.model_cache_dir)
    key = f"{cfg.get('embedder')}:{cfg.get('embedding_model')}:{cfg.get('encoder_precision')}:{models}"
    with _LOCK:
        if key not in _ENCODERS:
            try:
                inputs = {"model_cache_dir": models}
                _ENCODERS[key] = execute("search", cfg, ["encoder"], inputs=inputs)["encoder"]
            except Exception as exc:  # degraded mode: lexical only
                _ENCODERS[key] = exc
    value = _ENCODERS[key]
    return (None, f"{type(value).__name__}: {value}") if isinstance(value, Exception) else (value, None)


def ask(
    question: str,
    session: Session | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    library: str | Path | Library | None = None,
    zim_paths: Sequence[str | os.PathLike[str]] | None = None,
    kiwix_url: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> Answer:
    """Answer ``question`` from the library's books and the configured sources, with citations.

    Args:
        question: the question, in plain words.
        session: the conversation's cache (a new one when None).
        config: a config file, a mapping of overrides, or None (defaults + environment).
        library: the library directory (default: ``$FOLIO_LIBRARY`` or the per-user data dir).
        zim_paths: ZIM files for the kiwix source; ``kiwix_url``: a kiwix-serve instead.
        overrides: values of ask-graph nodes to use instead of computing them (Hamilton ``overrides``;
            tests and embedding apps: e.g. ``web_sources``, ``kiwix_ready``, ``kiwix_results``).
        filters: only the books these match (``author``, ``series``, ``tag``, ``language``, ``format``:
            ``dataflows.filtering``).
    """
    if not question.strip():
        raise FolioError("question", "empty question")
    cfg = ask_config(config, zim_paths, kiwix_url)
    lib, stores, maps = _library(library)
    if filters:
        from folio.dataflows.api import filtered_ids

        keep = filtered_ids(lib, None, filters)
        if keep is not None:
            stores = {b: s for b, s in stores.items() if b in keep}
            maps = {b: m for b, m in maps.items() if b in keep}
    if not stores and not overrides and not other_sources(cfg):
        raise FolioError(
            str(lib.path),
            "nothing to ask: the library has no books (folio ingest PATH) and no other source is configured",
        )
    encoder, why = query_encoder(cfg, lib)
    dr = ask_driver(cfg)
    inputs = {
        **settings_inputs(dr, cfg),
        "question": question,
        "book_stores": stores,
        "concept_maps": maps,
        "encoder": encoder,
        "session": session if session is not None else Session(),
    }
    if "cache_dir" in variable_names(dr):
        inputs["cache_dir"] = str(lib.cache_dir)  # the LLM disambiguation cache: inside the library
    given = dict(overrides or {})
    resources = shared_resources(cfg, dr, [n for n in RESOURCES if n not in given])
    deadline = Deadline.after(float(cfg.get("ask_deadline_seconds") or 60.0))
    with deadline_scope(deadline):  # fusion and every HTTP request of this ask stop at its deadline
        result: Answer = dr.execute(["answer"], inputs=inputs, overrides={**resources, **given})["answer"]
    if why and why != "search_mode is lexical" and stores:
        result = Answer(**{**result.__dict__, "notes": (*result.notes, f"encoder unavailable: {why}")})
    return _located(result, lib)


def _located(result: Answer, lib: Library) -> Answer:
    """The answer with its book citations located: book title, page (PDF) or position (percentage)."""
    if not any(c.kind == "book" for c in result.citations):
        return result
    books = {d["book_id"]: d for d in lib.descriptors()}
    citations = tuple(
        located_citation(c, books[c.book_id]) if c.kind == "book" and c.book_id in books else c
        for c in result.citations
    )
    return replace(result, citations=citations)
