"""Cross-source fusion: which source answers which clause, the sources' jobs, and one fused context.

Sources: ``book`` (the book flow, ``nodes/query/book_flow.py`` and ``nodes/query/answering.py``), ``kiwix``
(the
Kiwix nodes, ``nodes/kiwix/candidates.py`` … ``nodes/kiwix/fusion.py``, in this same graph) and
``web``/``news``
(SearXNG, ``nodes/backends/searxng.py``). Source names (``sources``) are validated, de-duplicated and
capped at ``fusion_max_sources``.

Plan (``source_plan``): a BOOK clause goes to the books; any other clause goes to the sources the LLM
router named for it (``RouteDecision.sources``: validated, de-duplicated, capped at
``fusion_max_sources``) among the enabled sources that can answer (Kiwix when it has a book to search,
``kiwix_ready``; web and news when ``searxng_url`` is set); to every one of those when the router named
none (the deterministic router never does) or none of its names is enabled; to the books when none can.
A non-BOOK clause with names goes to the books too (first): a book may tell it under another name
("Little Red Riding Hood" is Grimm's "Little Red-Cap"), which the book flow accepts through that other
name (``book_flow._alias``) or when the books hold its names and their evidence is sufficient; a clause
the books answer is not asked of Kiwix (issue 27: routing by evidence).

Kiwix query (``kiwix_query``): the clauses the plan sends to Kiwix, in the question's order, then the
BOOK clauses the books refused (no supporting evidence: a clause that shares words with a fairy tale and
finds no support there is asked of Kiwix too; web and news are not asked again) or answered off their
subject (``SourceResult.off_subject``: the clause's names are neither in the answer nor written as
names in the chunks it cites; "When does the Moon block out the Sun?", routed to The Time Machine's
"the moon" and "the sun", was answered with windows "blocked by fallen masses of stone"), joined by
" and " into one query ("" when none: the Kiwix nodes then search nothing and ask no
LLM). Kiwix therefore runs after the book flow. One clause,
the usual case, is searched exactly as ``folio kiwix`` would search it; several clauses are searched
as one question (their terms pooled), so each does not get its own article.

Differences from the design (``docs/design-differences.md``): the design runs every source of a question
concurrently under ``fusion_timeout_seconds``; here the book flow and then Kiwix run in the caller's
thread (web/news are pooled). Kiwix must wait for the books: the clauses the books refuse are asked of
Kiwix too (escalation, above), which a concurrent Kiwix job could not see; both are bounded by the ask's
deadline and Kiwix by its backend timeouts. Measured: the Kiwix stage takes a p50 of 20-35 ms per
question on the Kiwix questions (libzim, 5 ZIMs), so running it beside the books would save little.

Jobs: web and news run concurrently in the shared fusion pool (contextvars copied), submitted by
``pending_sources`` before the book flow and the Kiwix nodes run in the caller's thread;
``fusion_timeout_seconds`` bounds the wait for them from the moment they are submitted, and the ask's
total deadline (the active deadline) bounds it too: a straggler is abandoned (it keeps running in a daemon
thread, which never holds the process at exit) and a fast result survives. The Kiwix nodes are bounded
by the backend's own timeouts (``kiwix_timeout_seconds`` for a kiwix-serve, an overall deadline per
request) and by the ask's deadline (every HTTP request made under ``dataflows.asking.ask`` stops when it
passes: ``nodes.backends.deadlines``), not by the fusion timeout.

The ask's total deadline (``ask_deadline_seconds``, default 60) is not a node: ``dataflows.asking.ask``
starts it before running the graph and makes it the active deadline of the run
(``nodes.backends.deadlines.active_deadline()``), which ``source_results`` and every HTTP client obey.

Fusion (``fused_context``): only successful, non-empty results are kept. Empty is judged on the whole
result: blank, or nothing but a "no results" message (a ``LOOKS_EMPTY`` phrase, alone or followed by
"for …"/"matching …", in one short line); "No resultant force acts on a body at rest." is a result. A
book refusal ("I could not find support for this in the books.", ``REFUSALS``) is not an answer either,
but when another source answers it survives as a note ("book: "CLAUSE": I could not find support …").
The results left are de-duplicated first (a result goes when at least ``DUPLICATE_SHARE`` of its
sentences already appear in substance in a result with more sentences, whatever the completion order;
two sentences are the same in substance at ``SAME_SENTENCE`` Jaccard of their content stems), then
different clauses routed to the same source merge into one section: one header, labels and items in
the question's order (the order the results came in, never alphabetical), one item per clause, items
separated by ``---`` (``ITEM_SEPARATOR``: a merged group is multi-item), a line whose sentences an
earlier item already holds in substance (the same ``DUPLICATE_SHARE``/``SAME_SENTENCE`` rule, not exact
lower-cased lines) kept once, citation markers renumbered. Zero sections → ``NO_RESULTS``; one → its
text as is; several → each cut to ``fusion_max_chars_per_source`` and joined with
``[SOURCE — LABEL]`` headers and ``---`` separators.
Several results of one source for one clause stay separate sections: the Kiwix source gives one result
per book that answers (its passage, labelled "TITLE › SECTION", cited with the article's URL and
section), so a multi-book Kiwix answer has one level of headers and each book is cut on its own.

An off-subject book answer gives way to a Kiwix article that holds the clause's subject (``_on_subject``:
"Solar eclipse"); with no such article it stays.

Subject (issue 27, ``subjects.unheld``): a Kiwix passage is cited only when its article (title, section and
passage) holds half of the question's names and one at least ("Why did the Red-Headed League dissolve?" never
cites the Termites article, nor Scrooge's "Ghost of Christmas Yet to Come" the song "Come Back Baby") and,
unless its title holds them all or its passage each of several, something the question asks about them (the
Lion article names Africa, not its tallest mountain); for a question without names, what it asks about
(``subjects.holds_subject``: every word of its last "of" phrase, "the boiling point of ethanol" never cites
the Oxygen article; else half of its content words, "a car engine" not the Wiki article's "wiki engines"; or a
title that is its first subject words, "Emu" of "Where do emus live?"). The subject may be held by the
article's opening paragraph (its ``lead``: "Antarctica is Earth's southernmost continent"), what is asked
about a name by the title and passage only, and a relation in a past form ("wrote") is not asked for. An
article that does not is a note (the Kiwix stage has already tried its book's next articles), and a Kiwix
result left with none says which archives were searched.

Config keys: ``kiwix`` (variant: ``none`` has no Kiwix nodes; ``kiwix_ready`` is then false and
``kiwix_results`` empty), ``sources``, ``fusion_max_sources``, ``fusion_thread_pool_size``,
``fusion_timeout_seconds``, ``fusion_max_chars_per_source``, ``ask_deadline_seconds``, ``searxng_url``,
``searxng_timeout_seconds``, ``searxng_max_results``.
Limitations: a Kiwix failure that raises fails the question; a per-book Kiwix error (a damaged ZIM, a
kiwix-serve past its deadline) is a note ("kiwix: BOOK: reason") while the other books still answer.
"""

from __future__ import annotations

import re as _re
from collections.abc import Sequence
from typing import Any

from hamilton.function_modifiers import config, hamilton_exclude

from folio.nodes.backends.book_tools import PendingJobs, shared_pool
from folio.nodes.backends.deadlines import active_deadline
from folio.nodes.backends.searxng import SearxngSource
from folio.nodes.core.kiwix_types import KiwixCatalog, KiwixResult
from folio.nodes.core.ranking import names_in
from folio.nodes.core.subjects import unheld
from folio.nodes.core.text import sentences as _sentence_spans
from folio.nodes.core.text import stems, truncate
from folio.nodes.core.types import NO_RESULTS, Citation, FolioError, FusedContext, RouteDecision, SourceResult

DEFAULT_SOURCES = ("book", "kiwix", "web", "news")  # configs/default.yaml's ``sources``

KNOWN_SOURCES = ("book", "kiwix", "web", "news")
LOOKS_EMPTY = (
    "no results found",
    "no results",
    "no result",
    "nothing found",
    "no matches",
    "no match found",
    "0 results",
    "not found",
    "no articles found",
    "(no context)",
)
UNHELD = (
    "no articles found for the question's subject"  # articles found, none holding it (the notes say which)
)
REFUSALS = ("i could not find support for this in the books",)  # the books' "could not find" (answering.py)
_EMPTY_TAIL = _re.compile(r"^(?:(?:for|matching)\b.*)?$")
_EMPTY_MAX_WORDS = 12  # a "no results" message is one short line
DUPLICATE_SHARE = 0.6
SAME_SENTENCE = 0.8  # Jaccard of content stems at which two sentences say the same thing
ITEM_SEPARATOR = "\n---\n"  # between the items (clauses) of a merged, multi-item section
_MARKER = _re.compile(r"\[(\d+)\]")


@hamilton_exclude
def source_names(names: Sequence[str], max_sources: int) -> tuple[str, ...]:
    """Known source names, lower-cased, de-duplicated in order and capped; FolioError on an unknown one."""
    out: list[str] = []
    for raw in names:
        name = str(raw).strip().lower()
        if name not in KNOWN_SOURCES:
            raise FolioError("sources", f"unknown source {raw!r}: use {', '.join(KNOWN_SOURCES)}")
        if name not in out:
            out.append(name)
    return tuple(out[: max(1, int(max_sources))])


def _looks_empty(text: str) -> bool:
    """Blank, or the whole text is a "no results" message: a ``LOOKS_EMPTY`` phrase alone or followed
    by "for …" / "matching …", on one short line ("No resultant force acts on a body." is a result)."""
    core = " ".join(text.lower().split()).strip(" .!:")
    if not core:
        return True
    if "\n" in text.strip() or len(core.split()) > _EMPTY_MAX_WORDS:
        return False
    for phrase in LOOKS_EMPTY:
        p = phrase.strip(" .")
        if core == p or (core.startswith(p + " ") and _EMPTY_TAIL.match(core[len(p) + 1 :])):
            return True
    return False


def _is_refusal(text: str) -> bool:
    """The books' "I could not find support for this in the books." (its first line), whatever follows."""
    first = " ".join(text.strip().split("\n", 1)[0].lower().split()).strip(" .!")
    return first in REFUSALS


def _refusal_note(result: SourceResult) -> str:
    first = result.text.strip().split("\n", 1)[0].strip()
    return f'{result.source}: "{result.clause}": {first}' if result.clause else f"{result.source}: {first}"


def _sentence_keys(text: str) -> list[frozenset[str]]:
    plain = _MARKER.sub("", text)
    keys = [stems(plain[s:e]) for s, e in _sentence_spans(plain)]
    return [k for k in keys if k]


def _same(a: frozenset[str], b: frozenset[str]) -> bool:
    return len(a & b) / len(a | b) >= SAME_SENTENCE or (len(a) >= 3 and a <= b)


def _is_duplicate(keys: Sequence[frozenset[str]], other: Sequence[frozenset[str]]) -> bool:
    """At least ``DUPLICATE_SHARE`` of ``keys`` appear in substance among ``other``."""
    if not keys:
        return True
    found = sum(1 for k in keys if any(_same(k, o) for o in other))
    return found >= DUPLICATE_SHARE * len(keys)


def _dedupe(results: Sequence[SourceResult]) -> tuple[SourceResult, ...]:
    """Drop results repeating another; the one with fewer sentences goes. Kept results stay in input order.

    Results are judged from most sentences to fewest (ties by source, label, text), so the outcome does
    not depend on the order the sources finished in.
    """
    keys = [_sentence_keys(r.text) for r in results]
    order = sorted(
        range(len(results)),
        key=lambda i: (-len(keys[i]), results[i].source, results[i].label, results[i].text),
    )
    kept: list[int] = []
    for i in order:
        if not any(_is_duplicate(keys[i], keys[j]) for j in kept):
            kept.append(i)
    return tuple(results[i] for i in sorted(kept))


def _renumber(text: str, offset: int) -> str:
    return _MARKER.sub(lambda m: f"[{int(m.group(1)) + offset}]", text) if offset else text


def _merge_group(results: Sequence[SourceResult]) -> SourceResult:
    """Several clauses' results of one source as one section (see the notes above): one item per
    result, in the question's order, separated by ``ITEM_SEPARATOR``; a line whose sentences already
    appear in substance in an earlier item (the ``DUPLICATE_SHARE`` rule) is kept once."""
    if len(results) == 1:
        return results[0]
    citations: list[Citation] = []
    items: list[str] = []
    seen: list[frozenset[str]] = []
    for r in results:
        blob = _renumber(r.text, len(citations))
        citations.extend(r.citations)
        lines = []
        for line in blob.strip().split("\n"):
            keys = _sentence_keys(line)
            if not line.strip() or (keys and seen and _is_duplicate(keys, seen)):
                continue
            lines.append(line.strip())
            seen.extend(keys)
        if lines:
            items.append("\n".join(lines))
    labels = list(dict.fromkeys(r.label for r in results))
    return SourceResult(
        results[0].source,
        " + ".join(labels),
        ITEM_SEPARATOR.join(items),
        tuple(citations),
        None,
        " / ".join(r.clause for r in results),
        tuple(n for r in results for n in r.notes),
    )


def _header(result: SourceResult) -> str:
    source, label = result.source.upper(), result.label.strip()
    return f"[{source}]" if not label or label.upper() == source else f"[{source} — {label}]"


def _join(results: Sequence[SourceResult], max_chars: int) -> str:
    """Zero results: ``NO_RESULTS``; one: its text; several: truncated sections with headers."""
    if not results:
        return NO_RESULTS
    if len(results) == 1:
        return results[0].text
    return "\n\n---\n\n".join(f"{_header(r)}\n{truncate(r.text, max_chars)}" for r in results)


def _fuse_results(
    results: Sequence[SourceResult], source_order: Sequence[str], max_chars: int
) -> tuple[str, tuple[SourceResult, ...], tuple[str, ...]]:
    """Keep successful non-empty results, de-duplicate (the 60 % rule), merge clauses per source, join."""
    notes = [f"{r.source}: {r.error}" for r in results if r.error]
    refusals = [r for r in results if not r.error and _is_refusal(r.text)]
    usable = [r for r in results if not r.error and not _looks_empty(r.text) and r not in refusals]
    kept = _dedupe(usable) if len(usable) > 1 else tuple(usable)
    notes.extend(f"{r.source}: dropped as a duplicate of another source" for r in usable if r not in kept)
    rank = {name: i for i, name in enumerate(source_order)}
    groups: dict[str, list[SourceResult]] = {}
    # sources in order; within a source the results keep the order they came in (the question's order
    # of clauses; one clause's several Kiwix books, best first): the sort is stable
    for r in sorted(kept, key=lambda r: rank.get(r.source, len(rank))):
        groups.setdefault(r.source, []).append(r)
    merged: list[SourceResult] = []
    for group in groups.values():
        one_clause = len({r.clause for r in group}) == 1
        merged.extend(group if one_clause else [_merge_group(group)])
    if merged:
        notes.extend(_refusal_note(r) for r in refusals)
    return _join(merged, max_chars), tuple(merged), tuple(notes)


def _kiwix_source_results(result: KiwixResult) -> tuple[SourceResult, ...]:
    """A Kiwix result as fusion sources: one per book that answers (its passage, labelled "TITLE ›
    SECTION", cited with the article's URL and section) and whose article holds the question's subject
    (``subjects.unheld``); one empty result, labelled with the archives searched, when none does. The
    books that could not be opened or searched (a damaged ZIM) are notes on each."""
    notes = tuple(f"kiwix: {book}: {reason}" for book, reason in result.errors)
    judged = [(s, unheld(result.query, s)) for s in result.context.sections]
    sections = [s for s, why in judged if why is None]
    notes += tuple(f"kiwix: {s.title!r} {why}: not cited" for s, why in judged if why)
    if not sections:
        text = UNHELD if result.context.sections else (result.context.text or "no results found")
        label = ", ".join(result.searched_books) or "kiwix"  # the archives searched, for the refusal
        return (SourceResult("kiwix", label, text, (), None, result.query, notes),)
    out = []
    for s in sections:
        citation = Citation(
            "kiwix", zim=s.source, path=s.path, title=s.title, url=s.url, section=s.section, quote=s.text
        )
        label = f"{s.title} › {s.section}" if s.section else s.title
        out.append(SourceResult("kiwix", label or "kiwix", s.text, (citation,), None, result.query, notes))
    return tuple(out)


# --- nodes ---------------------------------------------------------------------------------------------


def fusion_pool(fusion_thread_pool_size: int = 12) -> Any:
    """The process-wide, long-lived fusion thread pool."""
    return shared_pool(int(fusion_thread_pool_size))


def web_sources(
    sources: Sequence[str] = DEFAULT_SOURCES,
    fusion_max_sources: int = 4,
    searxng_url: str | None = None,
    searxng_timeout_seconds: float | int = 10.0,
    searxng_max_results: int = 5,
) -> dict[str, Any]:
    """The enabled SearXNG sources (``web``, ``news``) by name; none without ``searxng_url``."""
    if not searxng_url:
        return {}
    enabled = source_names(sources, fusion_max_sources)
    return {
        name: SearxngSource(str(searxng_url), name, float(searxng_timeout_seconds), int(searxng_max_results))
        for name in ("web", "news")
        if name in enabled
    }


@config.when(kiwix="none")
def kiwix_ready__none() -> bool:
    """No Kiwix in this graph (``kiwix: none``)."""
    return False


@config.when_in(kiwix=["libzim", "http"])
def kiwix_ready__kiwix(kiwix_catalog: KiwixCatalog) -> bool:
    """Kiwix can answer: it has at least one book to search (none without ZIM files)."""
    return bool(kiwix_catalog.books)


def source_plan(
    routes: tuple[RouteDecision, ...],
    web_sources: dict[str, Any],
    kiwix_ready: bool,
    sources: Sequence[str] = DEFAULT_SOURCES,
    fusion_max_sources: int = 4,
) -> tuple[tuple[str, str], ...]:
    """(source, clause) jobs: BOOK clauses → ``book``; others → the enabled sources that can answer
    (the books when none can)."""
    ready = {name for name in web_sources} | ({"kiwix"} if kiwix_ready else set())
    external = tuple(s for s in source_names(sources, fusion_max_sources) if s != "book" and s in ready)
    jobs: list[tuple[str, str]] = []
    for r in routes:
        named = tuple(s for s in source_names(r.sources, fusion_max_sources) if s in external)
        targets = ("book",) if r.route == "BOOK" or not external else (named or external)
        if targets and targets[0] != "book" and names_in(r.question):
            targets = ("book", *targets)  # the books may spell its names otherwise (book_tools._alias)
        jobs.extend((s, r.question) for s in targets)
    return tuple(dict.fromkeys(jobs))


def _kiwix_clauses(
    plan: Sequence[tuple[str, str]], book_results: Sequence[SourceResult], escalate: bool
) -> tuple[str, ...]:
    """The clauses the plan sends to Kiwix, then (``escalate``) the book clauses the books refused or
    answered off their subject (``SourceResult.off_subject``)."""
    answered = {r.clause for r in book_results if r.citations and not _is_refusal(r.text)}
    planned = [clause for source, clause in plan if source == "kiwix" and clause not in answered]
    weak = [
        r.clause for r in book_results if escalate and r.clause and (_is_refusal(r.text) or r.off_subject)
    ]
    return tuple(dict.fromkeys([*planned, *weak]))


def _on_subject(results: Sequence[SourceResult]) -> tuple[SourceResult, ...]:
    """The results without the book answers off their subject that a Kiwix article answers instead."""
    cited = {r.clause for r in results if r.source == "kiwix" and r.citations}
    return tuple(r for r in results if not (r.off_subject and r.clause in cited))


@config.when_in(kiwix=["libzim", "http"])
def kiwix_query__kiwix(
    source_plan: tuple[tuple[str, str], ...],
    book_results: tuple[SourceResult, ...],
    kiwix_ready: bool,
    sources: Sequence[str] = DEFAULT_SOURCES,
    fusion_max_sources: int = 4,
) -> str:
    """The clauses the plan sends to Kiwix, and the book clauses the books could not support (when
    Kiwix is an enabled source with a book to search), joined by " and " ("" when none)."""
    escalate = kiwix_ready and "kiwix" in source_names(sources, fusion_max_sources)
    return " and ".join(_kiwix_clauses(source_plan, book_results, escalate))


def pending_sources(
    source_plan: tuple[tuple[str, str], ...], web_sources: dict[str, Any], fusion_pool: Any
) -> PendingJobs:
    """Every web and news (source, clause) job of the plan, submitted to the pool now."""
    jobs = [(s, c, web_sources[s]) for s, c in source_plan if s in web_sources]
    return PendingJobs(fusion_pool, jobs)


@config.when(kiwix="none")
def kiwix_results__none() -> tuple[SourceResult, ...]:
    """No Kiwix result (``kiwix: none``)."""
    return ()


@config.when_in(kiwix=["libzim", "http"])
def kiwix_results__kiwix(kiwix_result: KiwixResult, kiwix_catalog: KiwixCatalog) -> tuple[SourceResult, ...]:
    """The Kiwix result as fusion sources (one per book that answers, each with its citation); none
    when nothing was routed to Kiwix, or an error (a note) when Kiwix could not list its books."""
    if kiwix_result.query.strip():
        return _kiwix_source_results(kiwix_result)
    if kiwix_catalog.error is not None:
        return (SourceResult("kiwix", "kiwix", "", error=": ".join(kiwix_catalog.error)),)
    return ()


def source_results(
    pending_sources: PendingJobs,
    book_results: tuple[SourceResult, ...],
    kiwix_results: tuple[SourceResult, ...],
    fusion_timeout_seconds: float | int = 15.0,
) -> tuple[SourceResult, ...]:
    """The book and Kiwix results and the web/news results in by the fusion timeout or the active
    deadline (the ask's), whichever comes first (the rest as errors)."""
    done, failed = pending_sources.collect(float(fusion_timeout_seconds), active_deadline())
    out = list(_on_subject([*book_results, *kiwix_results]))
    for source, clause, result in done:
        out.append(
            result
            if isinstance(result, SourceResult)
            else SourceResult(source, source, str(result), clause=clause)
        )
    out.extend(SourceResult(source, source, "", error=why, clause=clause) for source, clause, why in failed)
    return tuple(out)


def fused_context(
    source_results: tuple[SourceResult, ...],
    sources: Sequence[str] = DEFAULT_SOURCES,
    fusion_max_sources: int = 4,
    fusion_max_chars_per_source: int = 1500,
) -> FusedContext:
    """The sources' results fused into one text (see the module docstring)."""
    order = source_names(sources, fusion_max_sources)
    text, kept, notes = _fuse_results(
        source_results, (*order, *KNOWN_SOURCES), int(fusion_max_chars_per_source)
    )
    return FusedContext(text, kept, notes)
