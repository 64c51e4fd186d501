"""Book flow (``answer_mode: pipeline``): scope → retrieval plan → evidence (one escalation at most).

1. Scope: one ``book_concept_map.lookup(clause)`` over the routed books. Only *specific* entity and
   event matches narrow the search (themes are too broad: measured, they cost Moby-Dick questions):
   items found in at most ``scope_max_chapters`` chapters (a name all over the book, such
   as "Ahab", does not). The chapters of the specific matches scoring at least half of the best one
   (best at least ``SCOPE_MIN_SCORE``), at most ``scope_max_chapters``, are the candidate chapters.
   No specific match: the whole books.
2. Retrieval plan (inside ``book_evidence``), by the question-kind rule (no LLM):
   - *concrete* when the clause has a quotation, a digit or a capitalised name after its first word,
     or (without a conceptual cue) opens with who / whom / whose / where / when / which / what /
     name / list / "how many|much|long|old|far";
   - *conceptual* when it opens with why / how (other than the quantities above) or holds a conceptual
     cue word (feel, think, theme, meaning, moral, lesson, symbol, represent, significance, purpose,
     relationship, describe, explain, compare, personality, attitude, learn, happen);
   - otherwise concrete.
   Concrete → ``text_search`` first, then ``semantic_search``; conceptual → the reverse. The two lists
   are fused by a convex combination of min-max-normalised scores, ``primary_search_weight`` (0.65) on
   the first one.
3. Evidence is *sufficient* when (a) every name of the clause is held by one of the top ten lexical and
   top ten semantic chunks: each content word of the name is in that chunk (light stems, any case; one slip —
   a letter added, dropped, changed or two swapped, in words of 5+ letters — forgiven against a
   capitalised word there: "Jemina" for "Jemima") and its last word is there capitalised or the whole
   name is there as consecutive words (names: ``named_phrases``, a lone capitalised first word aside);
   and (b) a lexical chunk holds at least ``evidence_min_coverage`` (0.8) of the clause's content words
   (light stems) or a semantic chunk has a similarity of at least ``evidence_min_similarity`` (0.44;
   MiniLM cosine on 120-token windows). Without semantic hits (semantic search unavailable) (b) is the
   words alone at ``LEXICAL_ONLY_COVERAGE`` (0.5). Nothing retrieved is insufficient. Insufficient
   evidence in candidate chapters widens the search to the whole routed books, once (``widened``);
   whole-book evidence is never widened again; insufficient whole-book evidence is the refusal, with a
   note naming the names the books do not hold ("Not in the books searched: Moriarty"). A clause with
   no name of its own that points back with a pronoun to names the clause before it missed is
   insufficient too ("Who is Count Dracula and where is his castle?": no castle a book describes is
   his).
   Calibrated on the odd-numbered questions of ``tests/qa/library_questions.jsonl`` (40 off-library,
   40 in-library, over the sample library): a question about something no book holds names a thing no
   book mentions (Dracula, Captain Hook) or reads unlike every passage (similarity under 0.44 for
   MiniLM), while an in-library question's best passage scores 0.45 and up. The earlier rule (coverage
   0.5 or similarity 0.5) answered 78% of the off-library questions with filler.
4. Optional chapter summaries (``answer_summaries: true``) for the chapters of the top two hits, for
   the LLM answer's prompt (so only with ``llm: openai``). A summary is read from the library's store
   when an earlier request made it, else made (map-reduce by the question's LLM client, at most 5
   calls of the budget, extractive when fewer are left or a call fails) and stored
   (``backends.summaries``, ``backends.summary_store``); a summary's notes (an LLM summary that fell
   back to the extractive one) are the answer's notes too.

Degradation: when semantic search cannot run (no encoder, a broken vector index) the flow is
lexical-only and notes "Semantic search unavailable". When the tool budget is spent, retrieval stops
with what it has and notes it.

Config keys: ``search_k``, ``scope_max_chapters``, ``primary_search_weight``, ``evidence_min_coverage``,
``evidence_min_similarity``, ``answer_summaries``, ``answer_mode`` (scope, kinds, evidence and summaries
are the pipeline's nodes; the agent uses the same ``BookTools`` itself, and ``fallback_evidence`` is the
agent's whole-book search when its answer cites nothing).
Limitations: coverage counts words, not meaning; a scope from a theme match can miss the chapter
that holds the answer when that chapter also matches the words (no widening then). The evidence rule
refuses vague or misspelt questions whose best passage scores under 0.44 (about 4% of FairytaleQA's,
scoped to their book), and answers off-library questions whose names all occur in the books and
whose words read like a passage ("How did the Titanic sink?" against Moby-Dick).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from hamilton.function_modifiers import config

from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.backends.rerank import RerankError, cross_encoder_scores, llm_order
from folio.nodes.backends.summaries import LLMSummarizer
from folio.nodes.backends.tools import (
    BookTools,
    BudgetExceeded,
    Session,
    ToolBudget,
)
from folio.nodes.scores import HitFusion, merge_ranked, missing_names, names_in, search_depth
from folio.nodes.text import (
    coverage,
    fold,
    question_kind,
    stems,
)
from folio.nodes.types import (
    BookEvidence,
    BookHits,
    ChapterSummary,
    ConceptMap,
    Hit,
    RouteDecision,
)

SCOPE_MIN_SCORE = 0.2
SCOPE_KINDS = ("entity", "event")  # themes are too broad to narrow the search (measured)
LEXICAL_ONLY_COVERAGE = 0.5  # the evidence rule without semantic search: today's words-only rule

_CONCRETE_OPENERS = frozenset(["who", "whom", "whose", "where", "when", "which", "what", "name", "list"])

# --- pure helpers ------------------------------------------------------------------------------------


def _scope(lookup: Sequence[tuple[str, Any]], max_chapters: int) -> tuple[str, ...] | None:
    """Candidate chapters from concept-map matches (see the module docstring); None = whole books."""
    scored: list[tuple[float, str]] = []
    for _, matches in lookup:
        for m in (*matches.entities, *matches.events, *matches.themes):
            if m.kind not in SCOPE_KINDS or len(m.chapter_ids) > max_chapters:
                continue  # a concept found all over the book does not narrow the search
            scored.extend((m.score / (1.0 + 0.2 * rank), cid) for rank, cid in enumerate(m.chapter_ids))
    if not scored:
        return None
    best = max(s for s, _ in scored)
    if best < SCOPE_MIN_SCORE:
        return None
    order: dict[str, float] = {}
    for s, cid in scored:
        if s >= 0.5 * best:
            order[cid] = max(order.get(cid, 0.0), s)
    return tuple(sorted(order, key=lambda c: (-order[c], c))[: max(1, int(max_chapters))]) or None


_BACK_PRONOUN = re.compile(r"\b(?:he|him|his|she|her|hers|it|its|they|them|their|theirs)\b", re.IGNORECASE)


def _refers_back(clause: str) -> str | None:
    """The pronoun by which a clause with no name of its own points back ("where is his castle"), or
    None."""
    if names_in(clause):
        return None
    found = _BACK_PRONOUN.search(clause)
    return found.group() if found else None


def _names_carried(clauses: Sequence[str], evidence: Sequence[BookEvidence]) -> tuple[BookEvidence, ...]:
    """Each clause's evidence, where a clause that points back with a pronoun to the names the clause
    before it missed is insufficient too ("Who is Count Dracula and where is his castle?": no book holds
    Dracula, so none holds his castle, whatever castle a book describes)."""
    out: list[BookEvidence] = []
    for clause, ev in zip(clauses, evidence, strict=True):
        before = out[-1].missing_names if out else ()
        pronoun = _refers_back(clause) if before else None
        if pronoun:
            note = f'Not in the books searched: {", ".join(before)} ("{pronoun}" in "{clause}")'
            ev = replace(ev, sufficient=False, missing_names=before, notes=(*ev.notes, note))
        out.append(ev)
    return tuple(out)


def _sufficient(
    question: str, lexical: Sequence[Hit], semantic: Sequence[Hit], min_coverage: float, min_similarity: float
) -> bool:
    """The evidence rule of the module docstring."""
    top = [*lexical[:10], *semantic[:10]]
    if not top or missing_names(question, [h.text for h in top]):
        return False
    terms = stems(question)
    best_coverage = max((coverage(terms, h.text) for h in lexical[:10]), default=0.0)
    if not semantic:  # semantic search could not run: the words alone
        return best_coverage >= LEXICAL_ONLY_COVERAGE
    return best_coverage >= min_coverage or max(h.score for h in semantic[:10]) >= min_similarity


def _boosted(hits: Sequence[Hit], scope: Sequence[str] | None, boost: float) -> tuple[Hit, ...]:
    """``hits`` with those of the ``scope``'s chapters raised by ``boost`` (fused scores lie in [0, 1]),
    re-sorted; every other hit keeps its score, so the best hits of the whole books still compete."""
    if not scope or boost <= 0:
        return tuple(hits)
    chapters = set(scope)
    raised = [replace(h, score=h.score + boost) if h.chapter_id in chapters else h for h in hits]
    return tuple(sorted(raised, key=lambda h: (-h.score, h.book_id, h.start, h.chunk_id)))


def _book_hits(
    tools: BookTools, clause: str, scope: tuple[str, ...] | None, k: int, boost: float
) -> BookHits:
    """``clause`` searched as ``folio search`` searches it, over the whole routed books, fused
    ``search_depth(k)`` deep (the first ``k`` are ``folio search``'s), the scope's chapters boosted."""
    try:
        found = tools.search(clause, None, k)
    except BudgetExceeded as exc:
        return BookHits(clause, (), (), (), scope, (), (exc.reason,))
    deep = tools.fusion(found.lexical, found.semantic, search_depth(k))
    where = f"; {len(scope)} candidate chapter(s) boosted" if scope and boost > 0 else ""
    searched = tuple(line + where for line in found.searched)
    return replace(found, hits=_boosted(deep, scope, boost), scope=scope, searched=searched)


def _merged(first: BookHits, more: Sequence[BookHits], k: int) -> BookHits:
    """``first`` and the searches ``more`` as one: its hits, then theirs not already found (by score)."""
    seen = {(h.book_id, h.chunk_id) for h in first.hits}
    extra = merge_ranked([[h for h in m.hits if (h.book_id, h.chunk_id) not in seen] for m in more], k)
    return BookHits(
        first.question,
        (*first.hits, *extra),
        (*first.lexical, *(h for m in more for h in m.lexical)),
        (*first.semantic, *(h for m in more for h in m.semantic)),
        first.scope,
        (*first.searched, *(line for m in more for line in m.searched)),
        tuple(dict.fromkeys((*first.notes, *(n for m in more for n in m.notes)))),
    )


def _escalated(
    tools: BookTools, found: BookHits, queries: Sequence[str], k: int
) -> tuple[BookHits, list[str]]:
    """The single escalation of insufficient evidence: the router's suggested queries (those other than
    the clause, at most three) searched once in the whole books, merged with what was found."""
    extra = [q for q in dict.fromkeys(queries) if fold(q).strip() != fold(found.question).strip()][:3]
    notes: list[str] = []
    more: list[BookHits] = []
    for query in extra:
        try:
            more.append(tools.search(query, None, k))
        except BudgetExceeded as exc:
            notes.append(exc.reason)
            break
    if more:
        notes.insert(
            0, f"Evidence insufficient: also searched the router's suggested queries once ({len(more)})"
        )
    return (_merged(found, more, k) if more else found), notes


def _judged(
    tools: BookTools,
    route: RouteDecision,
    kind: str,
    found: BookHits,
    k: int,
    min_coverage: float,
    min_similarity: float,
) -> BookEvidence:
    """The evidence rule on ``found``; insufficient evidence escalates once (``_escalated``)."""
    clause = route.question
    notes = list(found.notes)
    ok = _sufficient(clause, found.lexical, found.semantic, min_coverage, min_similarity)
    escalated = False
    if not ok and tools.budget.left > 0:
        more, more_notes = _escalated(tools, found, route.suggested_queries, k)
        if more is not found:
            escalated, found = True, more
            ok = _sufficient(clause, found.lexical, found.semantic, min_coverage, min_similarity)
        notes.extend(more_notes)
    missing: tuple[str, ...] = ()
    if not ok and (found.lexical or found.semantic):
        missing = missing_names(clause, [h.text for h in (*found.lexical[:10], *found.semantic[:10])])
        if missing:
            notes.append(f"Not in the books searched: {', '.join(missing)}")
    hits = tuple(found.hits[:k])
    return BookEvidence(
        hits, kind, found.scope, found.searched, ok and bool(hits), escalated, tuple(notes), missing
    )


def _reranked(
    found: BookHits, order: Callable[[str, list[str]], list[int]], depth: int, what: str
) -> BookHits:
    """``found`` with its first ``depth`` hits in the order ``order(question, texts)`` gives (0-based
    indexes); the incoming order and a note when the stage cannot run."""
    top = list(found.hits[: max(1, depth)])
    if len(top) < 2:
        return found
    try:
        ranks = order(found.question, [h.text for h in top])
    except RerankError as exc:
        return replace(found, notes=(*found.notes, f"{what} rerank unavailable ({exc}): search order kept"))
    reordered = tuple(top[i] for i in ranks)
    return replace(found, hits=(*reordered, *found.hits[len(top) :]))


def _cross_encoder_order(model: str | None) -> Callable[[str, list[str]], list[int]]:
    def order(question: str, texts: list[str]) -> list[int]:
        scores = cross_encoder_scores(model, question, texts)
        return sorted(range(len(texts)), key=lambda i: (-scores[i], i))

    return order


# --- nodes -------------------------------------------------------------------------------------------


def _tools(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    search_k: int,
    summarizer: LLMSummarizer | None,
    fusion: HitFusion,
) -> BookTools:
    maps: dict[str, ConceptMap] = {b: m for b, m in concept_maps.items() if m is not None}
    sess = session if isinstance(session, Session) else Session()
    return BookTools(
        book_stores, maps, encoder, tool_budget, sess, summarizer=summarizer, k=int(search_k), fusion=fusion
    )


@config.when_not(hybrid_fusion="rrf")
def hit_fusion__convex(hybrid_lexical_weight: float | int = 0.7) -> HitFusion:
    """How the book flow and the book tools fuse words and meaning: as ``folio search`` does (convex)."""
    return HitFusion("convex", float(hybrid_lexical_weight))


@config.when(hybrid_fusion="rrf")
def hit_fusion__rrf(hybrid_lexical_weight: float | int = 0.7, hybrid_rrf_k: int = 60) -> HitFusion:
    """How the book flow and the book tools fuse words and meaning: as ``folio search`` does (RRF)."""
    return HitFusion("rrf", float(hybrid_lexical_weight), int(hybrid_rrf_k))


@config.when(llm="none")
def book_tools__none(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    hit_fusion: HitFusion,
    search_k: int = 10,
) -> BookTools:
    """The book tools over every library book, counted by the question's budget, cached in the session;
    chapter summaries and synopses are extractive."""
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, None, hit_fusion)


@config.when(llm="openai")
def book_tools__openai(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    llm_client: OpenAIChatClient,
    hit_fusion: HitFusion,
    search_k: int = 10,
) -> BookTools:
    """The book tools over every library book, counted by the question's budget, cached in the session;
    chapter summaries and synopses are map-reduce by the question's LLM client, each of its calls spent
    from the same budget (extractive when too few are left)."""
    summarizer = LLMSummarizer(llm_client, budget=tool_budget)
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, summarizer, hit_fusion)


def book_questions(
    routes: tuple[RouteDecision, ...], source_plan: tuple[tuple[str, str], ...], book_catalog: tuple
) -> tuple[RouteDecision, ...]:
    """The clauses the source plan sends to the books (every book when the route named none)."""
    to_books = {clause for source, clause in source_plan if source == "book"}
    every = tuple(b.book_id for b in book_catalog)
    return tuple(
        r
        if r.book_ids
        else RouteDecision(r.route, r.confidence, r.suggested_queries, every, r.reason, r.question)
        for r in routes
        if r.question in to_books
    )


def _whole_book_evidence(
    tools: BookTools, question: str, k: int, min_coverage: float, min_similarity: float
) -> BookEvidence:
    found = _book_hits(tools, question, None, k, 0.0)
    route = RouteDecision("BOOK", 1.0, (question,), tuple(tools.stores), "", question)
    return _judged(tools, route, question_kind(question), found, k, min_coverage, min_similarity)


@config.when(answer_mode="agent")
def fallback_evidence__agent(
    search_k: int = 10,
    evidence_min_coverage: float | int = 0.8,
    evidence_min_similarity: float | int = 0.44,
) -> Callable[[BookTools, str], BookEvidence]:
    """The agent's fallback search ``(tools, question) -> evidence``: the question searched in the whole
    books as ``folio search`` does and judged by the evidence rule, run on the agent's tools and budget
    when it cites nothing."""
    return partial(
        _whole_book_evidence,
        k=int(search_k),
        min_coverage=float(evidence_min_coverage),
        min_similarity=float(evidence_min_similarity),
    )


@config.when(answer_mode="pipeline")
def question_kinds__pipeline(book_questions: tuple[RouteDecision, ...]) -> tuple[str, ...]:
    """Each book clause's kind: "concrete" or "conceptual"."""
    return tuple(question_kind(r.question) for r in book_questions)


@config.when(answer_mode="pipeline")
def book_scopes__pipeline(
    book_questions: tuple[RouteDecision, ...], book_tools: BookTools, scope_max_chapters: int = 8
) -> tuple[tuple[str, ...] | None, ...]:
    """Each book clause's candidate chapters from one concept-map lookup (None = none to boost)."""
    out: list[tuple[str, ...] | None] = []
    for r in book_questions:
        try:
            lookup = book_tools.for_books(r.book_ids).concept_map_lookup(r.question)
        except BudgetExceeded:
            lookup = ()
        out.append(_scope(lookup, int(scope_max_chapters)))
    return tuple(out)


@config.when(answer_mode="pipeline")
def book_hits__pipeline(
    book_questions: tuple[RouteDecision, ...],
    book_scopes: tuple[tuple[str, ...] | None, ...],
    book_tools: BookTools,
    search_k: int = 10,
    scope_boost: float | int = 0.1,
) -> tuple[BookHits, ...]:
    """Each book clause searched as ``folio search`` searches it (same lists, fusion, depth and
    tie-breaks) over all its routed books, the scope's candidate chapters raised by ``scope_boost``."""
    return tuple(
        _book_hits(book_tools.for_books(r.book_ids), r.question, scope, int(search_k), float(scope_boost))
        for r, scope in zip(book_questions, book_scopes, strict=True)
    )


@config.when(rerank="none", answer_mode="pipeline")
def ranked_hits__none(book_hits: tuple[BookHits, ...]) -> tuple[BookHits, ...]:
    """The hits in the search's order (``rerank: none``)."""
    return book_hits


@config.when(rerank="cross_encoder", answer_mode="pipeline")
def ranked_hits__cross_encoder(
    book_hits: tuple[BookHits, ...], rerank_model: str | None = None, rerank_depth: int = 20
) -> tuple[BookHits, ...]:
    """Each clause's first ``rerank_depth`` hits ordered by the cross-encoder ``rerank_model``; the
    search's order, with a note, when it cannot run."""
    order = _cross_encoder_order(rerank_model)
    return tuple(_reranked(found, order, int(rerank_depth), "cross-encoder") for found in book_hits)


@config.when(rerank="llm", answer_mode="pipeline")
def ranked_hits__llm(
    book_hits: tuple[BookHits, ...], llm_client: OpenAIChatClient, rerank_depth: int = 20
) -> tuple[BookHits, ...]:
    """Each clause's first ``rerank_depth`` hits ordered by one bounded LLM call (ids only, validated);
    the search's order, with a note, when the call fails or its reply is invalid."""
    order = partial(llm_order, llm_client)
    return tuple(_reranked(found, order, int(rerank_depth), "LLM") for found in book_hits)


@config.when(answer_mode="pipeline")
def book_evidence__pipeline(
    book_questions: tuple[RouteDecision, ...],
    question_kinds: tuple[str, ...],
    ranked_hits: tuple[BookHits, ...],
    book_tools: BookTools,
    search_k: int = 10,
    evidence_min_coverage: float | int = 0.8,
    evidence_min_similarity: float | int = 0.44,
) -> tuple[BookEvidence, ...]:
    """Each book clause's evidence: its ranked hits judged by the evidence rule; insufficient evidence
    escalates once (the router's suggested queries searched in the whole books); a clause pointing back
    with a pronoun to names the clause before it missed is insufficient too."""
    evidence = tuple(
        _judged(
            book_tools.for_books(r.book_ids),
            r,
            kind,
            found,
            int(search_k),
            float(evidence_min_coverage),
            float(evidence_min_similarity),
        )
        for r, kind, found in zip(book_questions, question_kinds, ranked_hits, strict=True)
    )
    return _names_carried([r.question for r in book_questions], evidence)


@config.when(answer_summaries=True, answer_mode="pipeline", llm="openai")
def chapter_summaries__on(
    book_evidence: tuple[BookEvidence, ...], book_tools: BookTools
) -> tuple[ChapterSummary, ...]:
    """Summaries of the chapters of each clause's top two hits (``answer_summaries: true``), with their
    notes."""
    out: list[ChapterSummary] = []
    for ev in book_evidence:
        for hit in ev.hits[:2]:
            if any(s.chapter_id == hit.chapter_id for s in out):
                continue
            try:
                made = book_tools.chapter_summary_with_notes(hit.chapter_id)
            except BudgetExceeded:
                return tuple(out)
            out.append(ChapterSummary(hit.chapter_id, made.text, made.notes))
    return tuple(out)


@config.when(answer_summaries=False, answer_mode="pipeline", llm="openai")
def chapter_summaries__off() -> tuple[ChapterSummary, ...]:
    """No chapter summaries (``answer_summaries: false``)."""
    return ()
