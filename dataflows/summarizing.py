"""``folio summary``: a chapter's summary or a book's synopsis, read from the library or made and stored.

    from folio.dataflows.summarizing import summary
    summary("alice", chapter="2", library="~/folio")   # {"summary": ..., "summariser": ..., ...}

The summary is the book tools' (``BookTools.summary_of`` / ``synopsis_of``, the same that ``folio ask``
in agent mode and the MCP tools ``chapter_summary_get`` / ``book_synopsis_get`` use): read back from
the library's summary store (``LIBRARY/cache/summaries/summaries.db``, ``nodes.backends.summary_store``)
when an earlier request of any process made it for the chapter's current text and this summariser,
else made now and stored. ``summarizer_for(config)`` is the LLM summariser of a config with ``llm:
openai`` (map-reduce, at most 5 LLM calls per summary, ``nodes.backends.summaries``) over the process's
one LLM connection, or None (extractive).

Config keys: ``llm`` and the ``llm_*`` settings of the connection. Limitations: a synopsis with an LLM
uses the chapters' stored LLM summaries where there are some and their extractive summaries elsewhere
(summarising every chapter by the LLM first would cost calls without bound): ask for chapter
summaries first for a fuller synopsis, then clear the store (``folio cache clear``) to remake it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")

from folio.dataflows.asking import ask_config, ask_driver, shared_resources
from folio.dataflows.library import Library
from folio.nodes.backends.book_tools import BookTools, Session, ToolBudget
from folio.nodes.backends.summaries import LLMSummarizer
from folio.nodes.core.types import ConceptMap, FolioError


def summarizer_for(config: Mapping[str, Any]) -> LLMSummarizer | None:
    """The LLM summariser of ``config`` (``llm: openai``) over the process's LLM connection, or None."""
    if config.get("llm") != "openai":
        return None
    connection = shared_resources(config, ask_driver(config), ["llm_connection"])["llm_connection"]
    return LLMSummarizer(connection)


def summary_tools(library: Library, config: Mapping[str, Any], limit: int = 1) -> BookTools:
    """Book tools over every book of ``library`` for summaries (no encoder), with ``config``'s
    summariser and a budget of ``limit`` tool calls."""
    stores = {s.book_id: s for s in library.stores(None)}
    maps = {b: library.concept_map(b) for b in stores}
    concept_maps: dict[str, ConceptMap] = {b: m for b, m in maps.items() if m is not None}
    return BookTools(
        stores, concept_maps, None, ToolBudget(limit), Session(), summarizer=summarizer_for(config)
    )


def chapter_id_of(titles: Mapping[str, str], ref: str) -> str:
    """The chapter id named by ``ref``: a chapter id of the book, or its number (1 = the first)."""
    if ref in titles:
        return ref
    ids = list(titles)
    if ref.isdigit() and 1 <= int(ref) <= len(ids):
        return ids[int(ref) - 1]
    raise FolioError(ref, f"no such chapter: give a chapter id or a number from 1 to {len(ids)}")


def summary(
    book: str,
    chapter: str | None = None,
    library: str | Path | Library | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A chapter's summary (``chapter``: its id or number) or, without ``chapter``, the book's synopsis.

    Returns ``{book_id, book_title, chapter_id, chapter_title, summary, summariser, computed, notes}``;
    ``computed`` is False when the summary was read back from the library's store.
    """
    lib = library if isinstance(library, Library) else Library(library)
    cfg = ask_config(config)
    book_id = lib.resolve_book(book)
    tools = summary_tools(lib, cfg)
    view = tools.stores[book_id]
    if chapter is None:
        tools.budget.spend("book_synopsis.get")
        chapter_id, chapter_title = "", ""
        made = tools.synopsis_of(book_id)
    else:
        chapter_id = chapter_id_of(view.titles, chapter)
        chapter_title = view.titles[chapter_id]
        tools.budget.spend("chapter_summary.get")
        made = tools.summary_of(chapter_id)
    return {
        "book_id": book_id,
        "book_title": view.descriptor.get("title", ""),
        "chapter_id": chapter_id,
        "chapter_title": chapter_title,
        "summary": made.text,
        "summariser": made.summariser,
        "computed": made.computed,
        "notes": list(made.notes),
    }
