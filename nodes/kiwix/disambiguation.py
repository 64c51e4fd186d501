"""Disambiguation of one-word questions ("What is Mercury?"): more candidates, and scoring picks.

With ``llm: openai`` the LLM is asked only when all four hold: an LLM is configured; the question is
definitional ("what is X", "what are X", "tell me about X", "what's the deal with X", "what's up with
X"); the primary selected book is a Wikipedia; the cleaned search terms are exactly one word. The LLM
returns 2-3 candidate phrases (JSON ``{"candidates": [...]}``); a phrase survives only if it contains
the original word as a whole word. Each survivor is searched in the primary book, results pooled and
de-duplicated by URL. Survivors are cached in diskcache under ``disambig_candidates:{search_terms}``
for ``disambiguation_cache_ttl`` seconds; a failed call (timeout, HTTP error, malformed JSON) is not
cached and the original word is then the only candidate (searched in the primary book, as designed;
before issue 32 the index rule below stood in), a real answer whose phrases all fail is cached (empty).

With ``llm: none`` (and ``disambiguation: true``) the index itself gives the candidates: title
suggestions in every selected book whose title contains the one search word as a whole word
("Mercury (planet)"). ``disambiguation: false`` turns both paths off.

The LLM is ``llm_client`` (``nodes/query/llm_connection.py``), the query graph's one client.

Config keys: ``disambiguation``, ``disambiguation_cache_ttl``, ``llm``. Inputs: ``kiwix_query``;
``cache_dir`` (the diskcache's parent folder: the library's ``cache/``; without one the phrases are kept in
memory for the process: nothing is written outside the library).
Limitations: one-word questions only; the LLM's phrases are trusted to be English article titles.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hamilton.function_modifiers import config

from folio.nodes.core.kiwix_types import Candidate, KiwixBook, KiwixCatalog
from folio.nodes.core.text import is_definitional
from folio.nodes.core.types import FolioError

logger = logging.getLogger(__name__)

SEARCH_LIMIT = 10
MAX_PHRASES = 3
CACHE_KEY_PREFIX = "disambig_candidates:"

CANDIDATES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "candidates": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3}
    },
    "required": ["candidates"],
}


# --- pure helpers ----------------------------------------------------------------------------------


def _contains_whole_word(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole word, case-insensitively ("C" is not in "Cat")."""
    if not word.strip():
        return False
    pattern = rf"(?<![^\W_]){re.escape(word.strip())}(?![^\W_])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _llm_applies(question: str, primary: KiwixBook | None, search_terms: str) -> bool:
    """The three query-side conditions of LLM disambiguation (the fourth, an LLM, is the variant)."""
    return (
        is_definitional(question)
        and primary is not None
        and primary.is_wikipedia
        and len(search_terms.split()) == 1
    )


def _valid_phrases(answer: Any, word: str) -> tuple[str, ...]:
    """Candidate phrases from an answer ``{"candidates": [...]}`` that contain ``word`` as a whole word.

    Raises:
        ValueError: the answer does not have the expected shape (treated as a failed call).
    """
    if not isinstance(answer, dict) or not isinstance(answer.get("candidates"), list):
        raise ValueError("expected {'candidates': [...]}")
    phrases = [p.strip() for p in answer["candidates"] if isinstance(p, str) and p.strip()]
    return tuple(dict.fromkeys(p for p in phrases if _contains_whole_word(p, word)))[:MAX_PHRASES]


def _disambiguation_messages(question: str, word: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": "The user's question names one ambiguous word. Reply with JSON "
            '{"candidates": [2 or 3 encyclopedia article titles the word most likely means]}. '
            "Every title must contain the word itself.",
        },
        {"role": "user", "content": f"Question: {question}\nWord: {word}"},
    ]


def _dedupe_by_url(groups: Iterable[Iterable[Candidate]]) -> tuple[Candidate, ...]:
    seen: set[str] = set()
    out: list[Candidate] = []
    for group in groups:
        for cand in group:
            if cand.url not in seen:
                seen.add(cand.url)
                out.append(cand)
    return tuple(out)


def _as_disambiguation(cands: Iterable[Candidate]) -> list[Candidate]:
    return [Candidate(c.book, c.path, c.title, c.excerpt, c.url, "disambiguation") for c in cands]


def _index_candidates(backend: Any, books: Sequence[str], word: str) -> tuple[Candidate, ...]:
    """Title suggestions for ``word`` in each book whose title contains it as a whole word."""
    groups = []
    for book in books:
        try:
            found = backend.suggest(book, word, SEARCH_LIMIT)
        except FolioError as exc:
            logger.warning("disambiguation suggestions failed for %s: %s", book, exc.reason)
            continue
        groups.append(_as_disambiguation(c for c in found if _contains_whole_word(c.title, word)))
    return _dedupe_by_url(groups)


def _phrase_candidates(backend: Any, book: str, phrases: Sequence[str]) -> tuple[Candidate, ...]:
    """Every phrase searched for real in ``book``, results pooled and de-duplicated by URL."""
    groups = []
    for phrase in phrases:
        try:
            groups.append(_as_disambiguation(backend.search(book, phrase, SEARCH_LIMIT)))
        except FolioError as exc:
            logger.warning("disambiguation search failed for %s: %s", book, exc.reason)
    return _dedupe_by_url(groups)


_MISSING = object()


def _cached_phrases(
    llm: Any, store: Any, question: str, word: str, search_terms: str, ttl: float
) -> tuple[str, ...] | None:
    """The LLM's valid phrases, from the cache or a fresh call; None when the call failed (not cached)."""
    key = f"{CACHE_KEY_PREFIX}{search_terms}"
    hit = store.get(key, default=_MISSING)
    if hit is not _MISSING:
        return tuple(hit)
    try:
        phrases = _valid_phrases(
            llm.chat_json(_disambiguation_messages(question, word), CANDIDATES_SCHEMA), word
        )
    except (FolioError, ValueError) as exc:
        logger.warning("LLM disambiguation failed, using the index: %s", exc)
        return None
    store.set(key, list(phrases), expire=ttl)
    return phrases


class _MemoryStore:
    """The disambiguation store of a process without a library cache folder: diskcache's ``get`` and
    ``set`` over a dict (nothing is written outside the library)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[float, Any]] = {}

    def get(self, key: str, default: Any = None) -> Any:
        expires, value = self._items.get(key, (0.0, default))
        return value if key in self._items and (not expires or expires > time.monotonic()) else default

    def set(self, key: str, value: Any, expire: float | None = None) -> None:
        self._items[key] = (time.monotonic() + expire if expire else 0.0, value)


def _book_by_name(books: Sequence[KiwixBook], name: str) -> KiwixBook | None:
    return next((b for b in books if b.name == name), None)


# --- nodes -----------------------------------------------------------------------------------------


@config.when(llm="openai")
def disambiguation_cache__openai(cache_dir: str | None = None) -> Any:
    """The diskcache store of LLM disambiguation phrases, under ``cache_dir`` (the library's cache
    folder); in memory for this process without one, or when it cannot be written."""
    import sqlite3

    import diskcache

    if not cache_dir:
        return _MemoryStore()
    path = Path(cache_dir) / "disambiguation"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return diskcache.Cache(str(path))
    except (OSError, sqlite3.Error):  # a read-only library: remembered for this process
        return _MemoryStore()


@config.when(llm="none")
def disambiguation_candidates__none(
    kiwix_backend: Any, selected_books: tuple[str, ...], search_terms: str, disambiguation: bool = True
) -> tuple[Candidate, ...]:
    """Index-driven candidates for a one-word query: suggestions whose title holds the word."""
    if not disambiguation or len(search_terms.split()) != 1:
        return ()
    return _index_candidates(kiwix_backend, selected_books, search_terms)


@config.when(llm="openai")
def disambiguation_candidates__openai(
    kiwix_backend: Any,
    llm_client: Any,
    disambiguation_cache: Any,
    kiwix_catalog: KiwixCatalog,
    selected_books: tuple[str, ...],
    search_terms: str,
    kiwix_query: str,
    disambiguation: bool = True,
    disambiguation_cache_ttl: float | int = 3600,
) -> tuple[Candidate, ...]:
    """LLM phrases searched in the primary book when all four conditions hold; the index rule on failure."""
    primary = _book_by_name(kiwix_catalog.books, selected_books[0]) if selected_books else None
    if not disambiguation or not _llm_applies(kiwix_query, primary, search_terms):
        return ()
    assert primary is not None
    phrases = _cached_phrases(
        llm_client,
        disambiguation_cache,
        kiwix_query,
        search_terms,
        search_terms,
        float(disambiguation_cache_ttl),
    )
    if phrases is None:  # the call failed: the original word is the only candidate (the design's rule)
        phrases = (search_terms,)
    return _phrase_candidates(kiwix_backend, primary.name, phrases)
