"""Fusion: the context handed to the answerer, built from the best sources.

Multi-book fusion (``kiwix_context``): when more than one book was selected, each book's own best
scored result competes; books whose best score is at least ``multibook_threshold`` of the overall top
score survive. Several survivors: each one's full article is fetched, cut to
``fusion_max_chars_per_source`` characters (at a word boundary) and wrapped in a ``[BOOKNAME]`` header,
highest score first. One survivor, one selected book, or only one fetch that succeeds: that section
alone, without a header. A failed fetch becomes an error for that book; the others still answer.

Config keys: ``multibook_threshold``, ``fusion_max_chars_per_source``.
Limitations: a book contributes one article; a top score of zero or less keeps only the top book.
The helpers take any (source, score, text) sections so cross-source fusion can reuse them.
"""

from __future__ import annotations

import re as _re
from collections.abc import Sequence
from typing import Any

from hamilton.function_modifiers import cache as _cache

from folio.nodes.backends.tools import PendingJobs, shared_pool
from folio.nodes.text import sentences as _sentence_spans
from folio.nodes.text import stems
from folio.nodes.types import (
    ContextSection,
    FolioError,
    FusedContext,
    KiwixContext,
    RouteDecision,
    ScoredCandidate,
    SourceResult,
)

# --- pure helpers ----------------------------------------------------------------------------------


def _best_per_source(scored: Sequence[ScoredCandidate]) -> tuple[ScoredCandidate, ...]:
    """Each book's own best candidate (input is best first), in score order."""
    best: dict[str, ScoredCandidate] = {}
    for sc in scored:
        best.setdefault(sc.candidate.book, sc)
    return tuple(sorted(best.values(), key=lambda s: -s.score))


def _survivors(best: Sequence[ScoredCandidate], threshold: float) -> tuple[ScoredCandidate, ...]:
    """Sources whose best score is at least ``threshold`` of the top score (only the top if it is <= 0)."""
    if not best:
        return ()
    top = best[0].score
    if top <= 0:
        return (best[0],)
    return tuple(s for s in best if s.score >= threshold * top)


def _truncate(text: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, cut back to the last space when that keeps over half."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text.strip()
    cut = text[: max_chars + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else text[:max_chars]).strip()


def _fuse(sections: Sequence[ContextSection]) -> str:
    """One section: its text alone. Several: each under a ``[SOURCE]`` header, in the given order."""
    if len(sections) == 1:
        return sections[0].text
    return "\n\n".join(f"[{s.source}]\n{s.text}" for s in sections)


def _fetch_sections(
    backend: Any, chosen: Sequence[ScoredCandidate], max_chars: int
) -> tuple[list[ContextSection], list[tuple[str, str]]]:
    sections: list[ContextSection] = []
    errors: list[tuple[str, str]] = []
    for sc in chosen:
        cand = sc.candidate
        try:
            art = backend.article(cand.book, cand.path)
        except FolioError as exc:
            errors.append((cand.book, exc.reason))
            continue
        sections.append(
            ContextSection(cand.book, art.title, art.url, sc.score, _truncate(art.text, max_chars))
        )
    return sections, errors


# --- nodes -----------------------------------------------------------------------------------------


def kiwix_context(
    scored_candidates: tuple[ScoredCandidate, ...],
    selected_books: tuple[str, ...],
    kiwix_backend: Any,
    multibook_threshold: int | float,
    fusion_max_chars_per_source: int,
) -> KiwixContext:
    """The context from the selected books' best articles (multi-book fusion when several books)."""
    in_selection = [s for s in scored_candidates if s.candidate.book in selected_books]
    best = _best_per_source(in_selection)
    chosen = _survivors(best, float(multibook_threshold)) if len(selected_books) > 1 else best[:1]
    sections, errors = _fetch_sections(kiwix_backend, chosen, int(fusion_max_chars_per_source))
    return KiwixContext(_fuse(sections) if sections else "", tuple(sections), tuple(errors))


# --- cross-source fusion (ask) ---------------------------------------------------------------------
# Sources are pluggable: ``book`` (the book flow, run in the caller's thread) and ``kiwix``, ``web``,
# ``news`` (callables ``clause -> SourceResult`` given as ``external_sources``, run concurrently in the
# shared pool, contextvars copied). Source names are validated, de-duplicated and capped at
# ``fusion_max_sources``. ``fusion_timeout_seconds`` bounds the caller's wait from the moment the jobs
# are submitted: a straggler is abandoned (it keeps running) and a fast result survives. Only successful,
# non-empty results are kept (``LOOKS_EMPTY`` phrases count as empty). Zero left → ``NO_RESULTS``;
# one → its text as is; several → de-duplicated (a result goes when at least ``DUPLICATE_SHARE`` of its
# sentences already appear in substance in a result with more sentences, whatever the completion
# order), each cut to ``fusion_max_chars_per_source`` and joined with ``[SOURCE — LABEL]`` headers and
# ``---`` separators. Clauses routed to the same source merge into one section: one header, one
# separator chosen once for the group ("\n" when every blob is one line, else a blank line), items
# (lines) repeated across blobs kept once, citation markers renumbered.
# Config keys: ``sources``, ``fusion_max_sources``, ``fusion_thread_pool_size``, ``fusion_timeout_seconds``,
# ``fusion_max_chars_per_source``.

KNOWN_SOURCES = ("book", "kiwix", "web", "news")
NO_RESULTS = "No results returned from any source in fusion query."
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
    "i could not find support",
)
DUPLICATE_SHARE = 0.6
SAME_SENTENCE = 0.8  # Jaccard of content stems at which two sentences say the same thing
_MARKER = _re.compile(r"\[(\d+)\]")


def _source_names(names: Sequence[str], max_sources: int) -> tuple[str, ...]:
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
    """Blank, or nothing but a "no results" phrase."""
    core = " ".join(text.lower().split()).strip(" .!:")
    return not core or any(core.startswith(p.strip(" .")) for p in LOOKS_EMPTY)


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
    """Several clauses' results of one source as one section (see the notes above)."""
    if len(results) == 1:
        return results[0]
    blobs, citations = [], []
    for r in results:
        blobs.append(_renumber(r.text, len(citations)))
        citations.extend(r.citations)
    separator = "\n" if all("\n" not in b.strip() for b in blobs) else "\n\n"
    seen: set[str] = set()
    items: list[str] = []
    for blob in blobs:
        for line in blob.strip().split("\n"):
            key = " ".join(_MARKER.sub("", line).lower().split())
            if not key or key in seen:
                continue
            seen.add(key)
            items.append(line.strip())
    labels = list(dict.fromkeys(r.label for r in results))
    return SourceResult(
        results[0].source,
        " + ".join(labels),
        separator.join(items),
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
    return "\n\n---\n\n".join(f"{_header(r)}\n{_truncate(r.text, max_chars)}" for r in results)


def _fuse_results(
    results: Sequence[SourceResult], source_order: Sequence[str], max_chars: int
) -> tuple[str, tuple[SourceResult, ...], tuple[str, ...]]:
    """Keep successful non-empty results, merge clauses per source, de-duplicate, join."""
    notes = [f"{r.source}: {r.error}" for r in results if r.error]
    usable = [r for r in results if not r.error and not _looks_empty(r.text)]
    rank = {name: i for i, name in enumerate(source_order)}
    groups: dict[str, list[SourceResult]] = {}
    for r in sorted(usable, key=lambda r: (rank.get(r.source, len(rank)), r.clause, r.label, r.text)):
        groups.setdefault(r.source, []).append(r)
    merged = [_merge_group(g) for g in groups.values()]
    kept = _dedupe(merged) if len(merged) > 1 else tuple(merged)
    notes.extend(f"{r.source}: dropped as a duplicate of another source" for r in merged if r not in kept)
    return _join(kept, max_chars), kept, tuple(notes)


# --- nodes ---------------------------------------------------------------------------------------------


@_cache(behavior="recompute")
def fusion_pool(fusion_thread_pool_size: int) -> Any:
    """The process-wide, long-lived fusion thread pool."""
    return shared_pool(int(fusion_thread_pool_size))


def source_plan(
    routes: tuple[RouteDecision, ...], sources: list, external_sources: dict, fusion_max_sources: int
) -> tuple[tuple[str, str], ...]:
    """(source, clause) jobs: BOOK clauses → ``book``; others → the configured external sources that
    are available (the books when none is)."""
    enabled = _source_names(sources, fusion_max_sources)
    external = tuple(s for s in enabled if s != "book" and s in external_sources)
    jobs: list[tuple[str, str]] = []
    for r in routes:
        targets = ("book",) if r.route == "BOOK" or not external else external
        jobs.extend((s, r.question) for s in targets)
    return tuple(dict.fromkeys(jobs))


@_cache(behavior="recompute")
def pending_sources(
    source_plan: tuple[tuple[str, str], ...], external_sources: dict, fusion_pool: Any
) -> Any:
    """Every external (source, clause) job, submitted to the pool now."""
    jobs = [(s, c, external_sources[s]) for s, c in source_plan if s != "book"]
    return PendingJobs(fusion_pool, jobs)


@_cache(behavior="recompute")
def source_results(
    pending_sources: Any, book_results: tuple[SourceResult, ...], fusion_timeout_seconds: float | int
) -> tuple[SourceResult, ...]:
    """The book results and the external results in by the deadline (the rest as errors)."""
    done, failed = pending_sources.collect(float(fusion_timeout_seconds))
    out = list(book_results)
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
    sources: list,
    fusion_max_sources: int,
    fusion_max_chars_per_source: int,
) -> FusedContext:
    """The sources' results fused into one text (see the cross-source fusion notes above)."""
    order = _source_names(sources, fusion_max_sources)
    text, kept, notes = _fuse_results(
        source_results, (*order, *KNOWN_SOURCES), int(fusion_max_chars_per_source)
    )
    return FusedContext(text, kept, notes)
