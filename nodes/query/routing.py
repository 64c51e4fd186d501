"""Router: which source answers each part of a question, and which library books it is about.

Decomposition: a compound question is split into clauses at ``;``, ``?`` and at ``and``/``also``/``then``
when the next word opens a new question (a wh-word or an auxiliary such as ``are``, ``is``, ``do``,
``can``): "indoor air quality and are the doors locked" → two clauses; "the brother and sister" stays
whole. Each clause is routed on its own.

Deterministic router (``llm: none``, and the fallback of the LLM router). Per book it measures: title or
author named in the clause (signal 1.0); a concept-map entity named in it, every content word of one
alias present (0.8); else lexical evidence, the share of the clause's content words (light stems) found
in the book's best bm25 chunk, capped at 0.5 for a definitional question ("what is X", "tell me about X")
so that common words turning up in a chapter do not pull general knowledge into a book. Then names
decide: the clause's proper names (runs of capitalised words, possessives "'s"/"’s"/"s'" stripped,
joined across "of" / "of the": "Queen of Hearts"; a lone first word is an imperative, not a name) are
looked up as phrases in every book's text; a name held by exactly one book raises that book to
``ENTITY_SIGNAL`` (not for a definitional question) and caps every book that holds no such name (nor
is named by title or author) at ``NAME_ELSEWHERE_CAP``: "How did Rumpelstiltskin's name get
discovered?" goes to Grimm alone, not to The Time Machine that holds "name", "get" and "discovered".
A clause whose names no book holds ("Why did the Beatles stop touring?") caps every book not named by
title or author the same way, so it goes to the other sources (or, with none, the books are searched and
the evidence rule decides).
A book's series (every word: "in the Sherlock Holmes stories") and each of its authors name it too.
The route follows the best book's signal: ``BOOK`` at 0.6 or more, ``NOT_BOOK`` below 0.3,
``AMBIGUOUS`` between. The books are those within 0.75 of the best signal, best first, so a clause
naming no book still reaches the right one and a clause spanning two books searches both.

``AMBIGUOUS`` is resolved by exactly one ``book_concept_map.lookup(clause)``: a match scoring at least
``STRONG_CONCEPT_SCORE`` (0.25) in some book that writes each of the clause's names (``holds_phrase``) →
``BOOK`` (those books), else ``NOT_BOOK`` (Sherlock's "Boscombe Pool" matches "What is the Pool of
Tears?" by one word, but the book never writes "Pool of Tears": the clause is not sent there alone).

LLM router (``llm: openai``): one JSON call per clause with the books' metadata and the tool inventory;
the answer ``{route, confidence, suggested_queries, book_ids, sources}`` is validated (route one of the
three, confidence in [0, 1], known book ids; ``sources``, for a NOT_BOOK clause only, the other sources
it needs among ``OTHER_SOURCES``, de-duplicated: ``nodes/query/source_fusion.py`` caps them and sends the
clause to those that are enabled); an invalid answer or a failed call falls back to the
deterministic router. The router counts as one tool call per clause (an LLM request counts itself).
The LLM is ``llm_client`` (``nodes/query/llm_connection.py``), the one client of the query graph.

Config keys: ``llm`` (variant), ``max_tool_calls`` (the question's ``tool_budget``).
Limitations: lexical evidence uses per-book bm25, so a very large book
can win weak lexical ties; the router never reads chapter text beyond the top chunk of each book; the
name rule reads names by capitals (a name that is also a common word, "Hearts", is held by many books
and decides nothing alone) and needs the name spelled as in the book, or held by the book's best
chunk for the clause by the evidence rule's name test (``scores.missing_names``: "Red-Headed League"
by "the Redheaded League").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hamilton.function_modifiers import config

from folio.nodes.backends.book_store import scopes
from folio.nodes.backends.book_tools import BookTools, BudgetExceeded, ToolBudget
from folio.nodes.backends.llm import LLMError
from folio.nodes.core.ranking import missing_names, search_text
from folio.nodes.core.text import (
    STOPWORDS,
    base_words,
    coverage,
    is_definitional,
    named_phrases,
    stem,
    stems,
    strip_possessives,
    tokens,
    words,
)
from folio.nodes.core.types import ROUTES, BookInfo, ConceptMap, FolioError, RouteDecision
from folio.nodes.core.whole_book import LIBRARY_NOTE, asks_library, is_library_question

BOOK_MIN_SIGNAL = 0.6
NOT_BOOK_MAX_SIGNAL = 0.3
BOOK_SHARE = 0.75
STRONG_CONCEPT_SCORE = 0.25
TITLE_SIGNAL = 1.0
ENTITY_SIGNAL = 0.8
DEFINITIONAL_CAP = 0.5  # lexical evidence alone never makes a definitional question BOOK
NAME_ELSEWHERE_CAP = 0.25  # a book without the clause's names when another book alone holds one

_OPENERS = frozenset(
    [
        "who",
        "whom",
        "whose",
        "what",
        "which",
        "where",
        "when",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "has",
        "have",
        "had",
        "am",
    ]
)
_SPLIT = re.compile(r"\s*(?:;|\?)\s*|\s+(?:and|also|then|plus)\s+(?=(\w+))", re.IGNORECASE)
_GENERIC_TITLE_WORDS = frozenset(
    ["book", "books", "story", "stories", "tale", "tales", "great", "big", "volume", "complete", "adventures"]
)
_HONORIFICS = frozenset(
    ["mr", "mrs", "miss", "ms", "dr", "sir", "lady", "lord", "captain", "mister", "madam"]
)

OTHER_SOURCES = ("kiwix", "web", "news")  # what the LLM router may name for a NOT_BOOK clause
ROUTER_SCHEMA: dict[str, Any] = {
    "title": "route",
    "type": "object",
    "properties": {
        "route": {"type": "string", "enum": list(ROUTES)},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        # bounded: a server that turns the schema into a grammar (llama-cpp-python) stops a small model
        # from repeating queries until the reply's token bound cuts the JSON off
        "suggested_queries": {
            "type": "array",
            "items": {"type": "string", "maxLength": 100},
            "maxItems": 3,
        },
        "book_ids": {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 5},
        "sources": {"type": "array", "items": {"type": "string", "enum": list(OTHER_SOURCES)}, "maxItems": 3},
    },
    "required": ["route", "confidence", "suggested_queries"],
}

# --- pure helpers ------------------------------------------------------------------------------------


def _clauses(question: str) -> tuple[str, ...]:
    """The question split into clauses that each ask something (see the module docstring)."""
    parts: list[str] = []
    start = 0
    for m in _SPLIT.finditer(question):
        follower = m.group(1)
        if follower is not None and follower.lower() not in _OPENERS:
            continue
        parts.append(question[start : m.start()])
        start = m.end()
    parts.append(question[start:])
    clauses = [search_text(p) for p in parts]  # the text every search of the clause encodes
    kept = tuple(c for c in clauses if any(w not in STOPWORDS for w in words(c)))
    return kept or (question.strip(),)


def _alias_terms(concept_map: ConceptMap) -> tuple[tuple[str, frozenset[str], int], ...]:
    """(entity name, alias word set, mentions) for every alias with a non-honorific content word."""
    out = []
    for e in concept_map.entities:
        for alias in e.aliases:
            terms = frozenset(base_words(alias)) - _HONORIFICS - STOPWORDS
            if terms:
                out.append((e.name, terms, e.mentions))
    return tuple(out)


_ALIASES: dict[int, tuple[ConceptMap, tuple[tuple[str, frozenset[str], int], ...]]] = {}


def _cached_aliases(concept_map: ConceptMap) -> tuple[tuple[str, frozenset[str], int], ...]:
    entry = _ALIASES.get(id(concept_map))
    if entry is None or entry[0] is not concept_map:
        entry = (concept_map, _alias_terms(concept_map))
        _ALIASES[id(concept_map)] = entry
    return entry[1]


def _named_entities(concept_map: ConceptMap | None, clause: str) -> tuple[str, ...]:
    """Entities of the map named in ``clause`` (every word of one alias present), most mentioned first."""
    if concept_map is None:
        return ()
    present = frozenset(base_words(clause))
    found: dict[str, int] = {}
    for name, terms, mentions in _cached_aliases(concept_map):
        if terms <= present:
            found[name] = max(found.get(name, 0), mentions)
    return tuple(sorted(found, key=lambda n: (-found[n], n)))


@functools.lru_cache(maxsize=256)
def _said(clause: str) -> tuple[frozenset[str], frozenset[str]]:
    """The clause's words and their stems (remembered: the router asks it of every book)."""
    said = words(clause)
    return frozenset(said), frozenset(stem(w) for w in said)


@functools.lru_cache(maxsize=8192)
def _book_names(
    title: str, series: str, authors: tuple[str, ...]
) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """A book's distinctive title stems, its series' stems and its authors' surnames (remembered)."""
    title_stems = frozenset(
        stem(w) for w in words(title) if w not in STOPWORDS and w not in _GENERIC_TITLE_WORDS
    )
    series_stems = frozenset(stem(w) for w in words(series) if w not in STOPWORDS)
    surnames = tuple(ws[-1] for ws in ([w for w in words(a) if len(w) > 2] for a in authors) if ws)
    return title_stems, series_stems, surnames


def _names_book(book: BookInfo, clause: str) -> bool:
    """The clause names the book: most of its distinctive title words, every word of its series ("in the
    Sherlock Holmes stories"), or an author's surname."""
    said, present = _said(clause)
    title, series, surnames = _book_names(book.title, book.series, book.authors or (book.author,))
    if title and len(title & present) >= max(1, round(0.6 * len(title))):
        return True
    if series and series <= present:
        return True
    return any(surname in said for surname in surnames)


def _book_signal(
    book: BookInfo, clause: str, concept_map: ConceptMap | None, top_chunk_text: str
) -> tuple[float, str]:
    """The book's routing signal in [0, 1] and why (see the module docstring)."""
    if _names_book(book, clause):
        return TITLE_SIGNAL, f"names {book.title!r}"
    named = _named_entities(concept_map, clause)
    if named:
        return ENTITY_SIGNAL, f"names {', '.join(named[:3])} ({book.title})"
    share = coverage(stems(clause), top_chunk_text)
    if is_definitional(clause) and share >= BOOK_MIN_SIGNAL:
        # "What is a noble gas?" naming no book, author or entity is general knowledge: its words turning
        # up in some chapter is not enough for BOOK, so the concept map decides (AMBIGUOUS).
        return DEFINITIONAL_CAP, f"{share:.0%} of the words in {book.title!r}, but a definitional question"
    return round(share, 4), f"{share:.0%} of the words in {book.title!r}"


def _clause_names(clause: str) -> tuple[str, ...]:
    """The clause's proper names: its runs of capitalised words, possessives stripped ("How did
    Rumpelstiltskin's name get discovered" -> "Rumpelstiltskin"), without a lone first word (an
    imperative: "Describe the wolf"), then the runs joined by "of" or "of the" ("Queen of Hearts")."""
    found = tokens(strip_possessives(clause))
    names = [n for n in named_phrases(clause) if [n] != found[:1]]
    for i in range(1, len(found) - 1):
        gap = 2 if found[i] == "of" and found[i + 1] == "the" else 1
        if (
            found[i] == "of"
            and i + gap < len(found)
            and found[i - 1][0].isupper()
            and found[i + gap][0].isupper()
        ):
            left = next((n for n in names if found[i - 1] == n.split()[-1]), found[i - 1])
            right = next((n for n in names if found[i + gap] == n.split()[0]), found[i + gap])
            names.append(" ".join([left, *found[i : i + gap], right]))
    return tuple(dict.fromkeys(names))


def _with_names(
    signals: Sequence[tuple[str, float, str]],
    held: Mapping[str, frozenset[str]],
    titles: Mapping[str, str],
    definitional: bool = False,
    names: Sequence[str] = (),
) -> list[tuple[str, float, str]]:
    """Signals after the name rule: a name of the clause held by exactly one book decides.

    ``held`` maps each book to the clause's names found in its text. When some name is held by one book
    only, that book's signal is at least ``ENTITY_SIGNAL``, and a book not named by title or author that
    holds none of the clause's names, or only words of such a name ("Queen", "Hearts" of "Queen of
    Hearts"), is capped at ``NAME_ELSEWHERE_CAP`` (out of the route's books); names held by several
    books change nothing. When the clause has ``names`` and no book holds any of them ("Why did the
    Beatles stop touring?"), every book not named by title or author is capped at ``NAME_ELSEWHERE_CAP``:
    the question is about something outside the library. A ``definitional`` clause ("What is the
    capital of France?") raises no book: a place named in a novel does not make general knowledge a
    question about the novel.
    """
    holders: dict[str, list[str]] = {}
    for book_id, held_names in held.items():
        for name in held_names:
            holders.setdefault(name, []).append(book_id)
    if names and not holders:
        return _unheld(signals, names, titles)
    unique = {name: books[0] for name, books in holders.items() if len(books) == 1}
    if not unique:
        return list(signals)
    out = []
    for book_id, signal, why in signals:
        own = sorted(n for n, b in unique.items() if b == book_id)
        if own:
            if signal < ENTITY_SIGNAL and not definitional:
                signal, why = (
                    ENTITY_SIGNAL,
                    f"names {', '.join(own)}, found only in {titles.get(book_id, book_id)!r}",
                )
        elif signal < TITLE_SIGNAL and not any(
            not any(set(n.split()) <= set(u.split()) for u in unique) for n in held.get(book_id, ())
        ):
            others = ", ".join(f"{n} is only in {titles.get(b, b)!r}" for n, b in sorted(unique.items()))
            signal, why = min(signal, NAME_ELSEWHERE_CAP), f"{why}, but {others}"
        out.append((book_id, signal, why))
    return out


def _unheld(
    signals: Sequence[tuple[str, float, str]], names: Sequence[str], titles: Mapping[str, str]
) -> list[tuple[str, float, str]]:
    """Every book not named by title or author capped: none holds any of the clause's ``names``."""
    why = f"but no book holds {', '.join(names)}"
    return [
        (b, s, w) if s >= TITLE_SIGNAL else (b, min(s, NAME_ELSEWHERE_CAP), f"{w}, {why}")
        for b, s, w in signals
    ]


def _decide(clause: str, signals: Sequence[tuple[str, float, str]]) -> RouteDecision:
    """A route from per-book signals ``(book_id, signal, why)``."""
    ranked = sorted(signals, key=lambda s: (-s[1], s[0]))
    best = ranked[0][1] if ranked else 0.0
    books = tuple(b for b, s, _ in ranked if s > 0 and s >= BOOK_SHARE * best)
    why = "; ".join(w for b, _, w in ranked if b in books) or "no book evidence"
    if best >= BOOK_MIN_SIGNAL:
        return RouteDecision("BOOK", best, (clause,), books, why, clause)
    if best < NOT_BOOK_MAX_SIGNAL:
        return RouteDecision("NOT_BOOK", 1.0 - best, (clause,), (), why, clause)
    return RouteDecision("AMBIGUOUS", 0.5, (clause,), books, why, clause)


def _resolve_ambiguous(decision: RouteDecision, tools: BookTools) -> RouteDecision:
    """One concept-map lookup: strong matches → BOOK (their books), else NOT_BOOK."""
    strong = []
    names = _clause_names(decision.question)
    for book_id, matches in tools.concept_map_lookup(decision.question):
        best = max((m.score for m in (*matches.entities, *matches.themes, *matches.events)), default=0.0)
        if best >= STRONG_CONCEPT_SCORE and _holds_names(tools.stores.get(book_id), names):
            strong.append((best, book_id))
    strong.sort(key=lambda s: (-s[0], s[1]))
    if strong:
        books = tuple(b for _, b in strong)
        return RouteDecision(
            "BOOK",
            strong[0][0],
            decision.suggested_queries,
            books,
            "AMBIGUOUS resolved by the concept map",
            decision.question,
        )
    return RouteDecision(
        "NOT_BOOK",
        0.5,
        decision.suggested_queries,
        (),
        "AMBIGUOUS: no strong concept-map match",
        decision.question,
    )


def _holds_names(store: Any, names: Sequence[str]) -> bool:
    """Whether the book holds each of the clause's names as written (a concept "Boscombe Pool" matching
    "the Pool of Tears" by one word is no match in a book that never writes "Pool of Tears")."""
    return store is not None and all(store.holds_phrase(n) for n in names)


def _deterministic(
    clause: str,
    catalog: Sequence[BookInfo],
    stores: Mapping[str, Any],
    concept_maps: Mapping[str, ConceptMap],
) -> RouteDecision:
    if is_library_question(clause):  # "Which books are in my library?": the catalogue answers
        return RouteDecision("BOOK", 1.0, (clause,), tuple(b.book_id for b in catalog), LIBRARY_NOTE, clause)
    signals = []
    names = _clause_names(clause)
    top: dict[str, str] = {}
    holders: dict[str, frozenset[str]] = {}
    for index, ids in scopes([stores[b.book_id] for b in catalog]):  # one lookup per library
        top.update((h.book_id, h.text) for h in index.lexical(clause, 1, ids, per_book=True))
        holders.update((n, holders.get(n, frozenset()) | index.books_holding(n, ids)) for n in names)
    spelled = {n for n in names if holders.get(n)}  # a name some book holds as spelled needs no alias
    for book_id, text in top.items():  # a name the book spells otherwise: the evidence rule's name test
        unheld = [n for n in names if n not in spelled and book_id not in holders.get(n, frozenset())]
        missing = set(missing_names(clause, [text])) if unheld else set()
        for n in unheld:
            if " ".join(tokens(n)) not in missing:
                holders[n] = holders.get(n, frozenset()) | {book_id}
    held: dict[str, frozenset[str]] = {}
    for book in catalog:
        signal, why = _book_signal(book, clause, concept_maps.get(book.book_id), top.get(book.book_id, ""))
        signals.append((book.book_id, signal, why))
        held[book.book_id] = frozenset(n for n in names if book.book_id in holders[n])
    titles = {b.book_id: b.title for b in catalog}
    return _decide(clause, _with_names(signals, held, titles, is_definitional(clause), names))


def _router_messages(clause: str, catalog: Sequence[BookInfo]) -> list[dict[str, str]]:
    series = {b.book_id: f", series {b.series}" if b.series else "" for b in catalog}
    lines = [f"- {b.book_id}: {b.describe()} ({b.language}{series[b.book_id]})" for b in catalog]
    books = "\n".join(lines) or "(none)"
    tools = ", ".join(
        [
            "book_concept_map.lookup",
            "chapter_summary.get",
            "text_search",
            "semantic_search",
            "chunk.get",
            "book_synopsis.get",
        ]
    )
    return [
        {
            "role": "system",
            "content": "You route questions for a reading assistant. route BOOK when the question is about "
            "one of the user's books, NOT_BOOK for general knowledge (answered from an offline encyclopedia "
            "or the web), AMBIGUOUS when unsure. List the book ids it is about in book_ids and up to three "
            "short search queries in suggested_queries. For NOT_BOOK, name in sources which of kiwix "
            "(offline encyclopedia), web and news it needs. "
            f"Book tools: {tools}.\nBooks:\n{books}",
        },
        {"role": "user", "content": clause},
    ]


def _validated(answer: Mapping[str, Any], clause: str, catalog: Sequence[BookInfo]) -> RouteDecision:
    """The LLM's route as a ``RouteDecision``; ``ValueError`` when it is not a valid one."""
    route = answer.get("route")
    if route not in ROUTES:
        raise ValueError(f"route must be one of {', '.join(ROUTES)}, not {route!r}")
    confidence = answer.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise ValueError(f"confidence must be a number in [0, 1], not {confidence!r}")
    queries = answer.get("suggested_queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError("suggested_queries must be a list of strings")
    known = {b.book_id for b in catalog}
    book_ids = tuple(b for b in answer.get("book_ids") or () if isinstance(b, str) and b in known)
    kept = tuple(q.strip() for q in queries if q.strip())[:3] or (clause,)
    named = (str(x).strip().lower() for x in answer.get("sources") or () if isinstance(x, str))
    sources = tuple(dict.fromkeys(x for x in named if x in OTHER_SOURCES)) if route == "NOT_BOOK" else ()
    return RouteDecision(route, float(confidence), kept, book_ids, "LLM router", clause, sources)


# --- nodes -------------------------------------------------------------------------------------------


def question_clauses(question: str) -> tuple[str, ...]:
    """The question's clauses (a simple question is one clause)."""
    if not question.strip():
        raise FolioError("question", "empty question")
    return _clauses(question)


def book_catalog(book_stores: dict) -> tuple[BookInfo, ...]:
    """The library books' metadata, by title."""
    infos = [
        BookInfo(
            s.book_id,
            s.descriptor.get("title", ""),
            s.descriptor.get("author", ""),
            s.descriptor.get("language", ""),
            s.descriptor.get("translator", ""),
            s.descriptor.get("edition", ""),
            s.descriptor.get("series") or "",
            tuple(s.descriptor.get("authors") or ()),
        )
        for s in book_stores.values()
    ]
    return tuple(sorted(infos, key=lambda b: (b.title.lower(), b.book_id)))


def tool_budget(max_tool_calls: int = 8) -> ToolBudget:
    """The question's tool budget (router, tools and LLM requests)."""
    return ToolBudget(int(max_tool_calls))


def deterministic_routes(
    question_clauses: tuple[str, ...],
    book_catalog: tuple[BookInfo, ...],
    book_stores: dict,
    concept_maps: dict,
) -> tuple[RouteDecision, ...]:
    """Each clause's deterministic route (AMBIGUOUS not yet resolved)."""
    return tuple(_deterministic(c, book_catalog, book_stores, concept_maps) for c in question_clauses)


@config.when(llm="none")
def routes__none(
    deterministic_routes: tuple[RouteDecision, ...], book_tools: BookTools, tool_budget: ToolBudget
) -> tuple[RouteDecision, ...]:
    """Deterministic routes; AMBIGUOUS ones resolved by one concept-map lookup each."""
    out = []
    for decision in deterministic_routes:
        tool_budget.spend("router")
        out.append(_resolve_ambiguous(decision, book_tools) if decision.route == "AMBIGUOUS" else decision)
    return tuple(out)


@config.when(llm="openai")
def routes__openai(
    deterministic_routes: tuple[RouteDecision, ...],
    book_catalog: tuple[BookInfo, ...],
    book_tools: BookTools,
    llm_client: Any,
) -> tuple[RouteDecision, ...]:
    """The LLM's routes, validated; an invalid answer or failed call falls back to the deterministic route."""
    out = []
    for fallback in deterministic_routes:
        clause = fallback.question
        if asks_library(fallback):  # a question about the library itself needs no LLM
            out.append(fallback)
            continue
        try:
            answer = llm_client.chat_json(_router_messages(clause, book_catalog), ROUTER_SCHEMA)
            decision = _validated(answer, clause, book_catalog)
            if decision.route == "BOOK" and not decision.book_ids:
                decision = RouteDecision(
                    "BOOK",
                    decision.confidence,
                    decision.suggested_queries,
                    fallback.book_ids or tuple(b.book_id for b in book_catalog),
                    decision.reason,
                    clause,
                )
        except BudgetExceeded:
            raise
        except (LLMError, ValueError) as exc:
            decision = RouteDecision(
                fallback.route,
                fallback.confidence,
                fallback.suggested_queries,
                fallback.book_ids,
                f"LLM router failed ({exc}); deterministic router: {fallback.reason}",
                clause,
            )
        if decision.route == "AMBIGUOUS":
            decision = _resolve_ambiguous(decision, book_tools)
        out.append(decision)
    return tuple(out)
