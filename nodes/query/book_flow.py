"""Book flow (``answer_mode: pipeline``): book_hits → ranked_hits → book_evidence (one escalation).

1. ``book_hits``: each book clause searched as ``folio search`` searches it (``BookTools.search``: the
   lexical and semantic lists ``search_depth(k)`` deep, fused by the configured ``hybrid_fusion`` and
   ``hybrid_lexical_weight``, the same tie-breaks: ``nodes/core/ranking.py``) over all its routed books, so an
   AMBIGUOUS or several-book clause gets the best evidence across them. The scope: one
   ``book_concept_map.lookup(clause)``; only *specific* entity and event matches (found in at most
   ``scope_max_chapters`` chapters; themes are too broad) scoring at least half of the best (at least
   ``SCOPE_MIN_SCORE``) give candidate chapters, whose hits gain ``scope_boost`` (0.1; fused scores lie
   in [0, 1]). The scope is never searched alone: the best hits of the whole books always compete. A
   clause asking about the library itself (``whole_book.asks_library``: "Which books are in my
   library?") is searched nowhere, nor judged in 3: the catalogue answers it.
2. ``ranked_hits`` (``rerank``): ``none`` (the default), ``cross_encoder`` (``rerank_model``, the first
   ``rerank_depth`` hits) or ``llm`` (one bounded call ordering them by id); a stage that cannot run
   keeps the search order with a note (``nodes/backends/rerank.py``).
3. ``book_evidence`` (the rule's helpers: ``nodes/core/evidence.py``). First, a word of the clause written
   with a slip (``ranking.word_respellings``: 5+ letters, not a name, held by no evidence text nor by any
   book in play, no word the encoder's vocabulary keeps whole unless a ``spelling_variant``: "scare" is
   no slip of "scarce"; one slip after its first two letters from a word the evidence writes twice:
   "parsely", "hosue", "recognise") is searched again as the evidence writes it; when that search is
   sufficient evidence (below), it replaces the first, the answer's notes say so ('Read "parsely" as
   "parsley"') and the reader reads the clause so (FairytaleQA writes about 25 of its 365 questions with
   slips, most of them in names, which ``respellings`` reads). The evidence is *sufficient* when
   (a) every name of the clause is held by one of the top ten lexical and top ten semantic chunks, their
   chapters' titles or the books' titles (``missing_names``: each content word there,
   light stems, one slip or a moved letter forgiven against a capitalised word, "Lucdina" for "Lucinda",
   "Redheaded" for "Red-Headed"; the last
   word capitalised or the whole name as consecutive words; a month also as its abbreviation, "Jan. 1st")
   and (b) a lexical chunk holds at least ``evidence_min_coverage`` (0.8) of the clause's content words
   (all of them but how it is asked: "kind", "often", "every") or a semantic chunk scores at least
   ``evidence_min_similarity`` (0.44; MiniLM cosine); without semantic hits, (b) is the words alone at
   ``LEXICAL_ONLY_COVERAGE``. Calibrated on ``tests/qa/library_questions.jsonl``: off-library questions
   name a thing no book mentions or read unlike every passage. Insufficient evidence escalates once: a
   missing name that a chapter of the three best passages by meaning is titled another way
   (``_alias``: "Little Red Riding Hood" is Grimm's "Little Red-Cap"; a name inside a title-like phrase is
   compared as the phrase: "The Wolf and the Seven Kids" is "The Wolf and the Seven Little Goats"; the
   answer says so), else the
   router's suggested queries (an LLM router's) searched in the whole books; then the refusal, naming
   the names no book holds. A question for someone's thing that no passage names ("What is the name of
   Sherlock Holmes's sister?") is insufficient, saying what was found and what was not, as is one whose
   names only one passage holds, saying nothing of what is asked ("How did the Titanic sink?"); so is one
   asking for a kind of thing no passage mentions ("Which university did Alice attend?"). A clause with
   no name of its own pointing back with a pronoun to names the clause before it missed is insufficient.
   A clause routed to other sources too is supported here only through such an alias, or when it has
   names and sufficient evidence (the books hold what it names and answer it: routing by evidence).
4. Optional chapter summaries (``answer_summaries: true``, ``llm: openai``) of the top two hits'
   chapters for the LLM answer's prompt, stored in the library; their notes are the answer's.

Agent mode: the same ``BookTools``, one widening (``escalating``); ``fallback_evidence`` is its whole-book
search when it cites nothing. No semantic search: lexical only (noted); a spent budget stops (noted).

Config keys: ``search_k``, ``hybrid_fusion``, ``hybrid_lexical_weight``, ``hybrid_rrf_k``,
``scope_max_chapters``, ``scope_boost``, ``rerank``, ``rerank_model``, ``rerank_depth``,
``evidence_min_coverage``, ``evidence_min_similarity``, ``answer_summaries``, ``answer_mode``.
Limitations: coverage counts words, not meaning; the ask searches the routed books with their own term
statistics (as ``folio search --book``), which can rank differently from a whole-library search; the
evidence rule refuses vague questions whose best passage scores under 0.44 and answers off-library
questions whose names all occur in the books and whose words read like a passage; the relation rule
reads only "what/who is (the name of) X's Y" questions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from hamilton.function_modifiers import config

from folio.nodes.backends.book_tools import (
    BookTools,
    BudgetExceeded,
    Session,
    ToolBudget,
)
from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.backends.rerank import cross_encoder_order, llm_order, reranked
from folio.nodes.backends.summaries import LLMSummarizer
from folio.nodes.core.evidence import (
    held_texts,
    refers_back,
    renamed,
    scope_chapters,
    sufficient,
    unheld_focus,
    unheld_kind,
    unheld_price,
    unheld_relation,
)
from folio.nodes.core.ranking import (
    HitFusion,
    merge_ranked,
    missing_names,
    names_in,
    respellings,
    search_depth,
    title_phrase,
    word_respellings,
)
from folio.nodes.core.text import (
    fold,
    question_kind,
    stems,
)
from folio.nodes.core.types import (
    BookEvidence,
    BookHits,
    ChapterSummary,
    ConceptMap,
    Hit,
    RouteDecision,
)
from folio.nodes.core.whole_book import asks_library
from folio.nodes.core.word_forms import spelling_variant

# A missing name and a chapter title read alike from this cosine (MiniLM): "Little Red Riding Hood" and
# "Little Red-Cap" 0.66; with half the name's words shared ("Harry Potter" / "Beatrix Potter" 0.68 would
# pass too, which is why the title must also head a chapter of the three best passages by meaning).
ALIAS_MIN_SIMILARITY = 0.6


# --- pure helpers ------------------------------------------------------------------------------------


def _names_carried(clauses: Sequence[str], evidence: Sequence[BookEvidence]) -> tuple[BookEvidence, ...]:
    """Each clause's evidence, where a clause that points back with a pronoun to the names the clause
    before it missed is insufficient too ("Who is Count Dracula and where is his castle?": no book holds
    Dracula, so none holds his castle, whatever castle a book describes)."""
    out: list[BookEvidence] = []
    for clause, ev in zip(clauses, evidence, strict=True):
        before = out[-1].missing_names if out else ()
        pronoun = refers_back(clause) if before else None
        if pronoun:
            note = f'Not in the books searched: {", ".join(before)} ("{pronoun}" in "{clause}")'
            ev = replace(ev, sufficient=False, missing_names=before, notes=(*ev.notes, note))
        out.append(ev)
    return tuple(out)


def _alias(
    tools: BookTools, clause: str, names: Sequence[str], semantic: Sequence[Hit]
) -> tuple[str, str] | None:
    """``(name, the book's name)`` for a name the books do not hold that a chapter of the best passages by
    meaning is titled by another way (at least half of the name's content words shared, and the two
    read alike: ``ALIAS_MIN_SIMILARITY``): "Little Red Riding Hood" is Grimm's "Little Red-Cap". A name
    inside a title-like phrase of the clause is compared as that phrase first ("The Wolf and the Seven
    Kids", not "Seven Kids", is Lucy Crane's "The Wolf and the Seven Little Goats")."""
    if tools.encoder is None:
        return None
    titles = list(dict.fromkeys(h.chapter_title for h in semantic[:3] if h.chapter_title))
    for name in dict.fromkeys(form for n in names for form in (title_phrase(clause, n), n)):
        words = stems(name)
        best: tuple[float, str] | None = None
        for title in titles:
            if not words or 2 * len(words & stems(title)) < len(words):
                continue
            similarity = float(tools.encoder.encode_query(name) @ tools.encoder.encode_query(title))
            if similarity >= ALIAS_MIN_SIMILARITY and (best is None or similarity > best[0]):
                best = (similarity, title)
        if best is not None:
            return name, _as_title(best[1])
    return None


def _as_title(title: str) -> str:
    """A chapter title as a name: its words in capitals written as a title's ("LITTLE RED-CAP" ->
    "Little Red-Cap", "The WOLF and the SEVEN LITTLE GOATS." -> "The Wolf and the Seven Little Goats")."""
    words = [
        "-".join(p.capitalize() for p in w.split("-")) if w.isupper() and len(w) > 1 else w
        for w in title.rstrip(" .").split()
    ]
    return " ".join(words)


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
    alias_only: bool = False,
) -> BookEvidence:
    """The evidence rule on ``found``; insufficient evidence escalates once: to the book's own name for a
    name it spells otherwise (``_alias``) or to its spelling of a name asked with a slip (``respellings``:
    "Mitthens"), else to the router's suggested queries (``_escalated``). A
    question for someone's thing, or for a kind of thing ("which university") no passage names, is
    insufficient too (``nodes/core/evidence.py``).
    ``alias_only``: a clause routed to other sources too is supported only through a book's own name for
    one of its names, or when it names what the books hold and their evidence is sufficient (the books
    answer it well: routing by evidence); else those sources answer it."""
    clause = route.question
    notes = list(found.notes)
    titles = [str(v.descriptor.get("title", "")) for v in tools.stores.values()]
    ok = sufficient(clause, found.lexical, found.semantic, min_coverage, min_similarity, titles)
    respelled, slips = _slips_read(tools, found, k, titles)
    lists = (respelled.lexical, respelled.semantic)
    if slips and sufficient(renamed(clause, slips), *lists, min_coverage, min_similarity, titles):
        found, ok, clause = respelled, True, renamed(clause, slips)  # the rules below read it so
        notes.extend(f'Read "{asked}" as "{own}"' for asked, own in slips)
    else:  # a respelling whose search is not sufficient evidence leaves the clause as asked (its
        # search is still listed among those a refusal names)
        found, slips = replace(found, searched=respelled.searched), ()
    escalated, aliases = False, slips
    top = held_texts(found.lexical, found.semantic, titles)
    if not ok and tools.budget.left > 0:
        alias = _alias(tools, clause, missing_names(clause, top), found.semantic)
        names = (alias,) if alias is not None else respellings(clause, top)
        if names:
            asked = renamed(clause, names)
            more = _book_hits(tools, asked, found.scope, k, 0.0)
            if sufficient(asked, more.lexical, more.semantic, min_coverage, min_similarity, titles):
                escalated, ok, aliases = True, True, (*aliases, *names)
                found = replace(more, searched=(*found.searched, *more.searched))
                notes.extend(f'The book calls {name} "{own}"' for name, own in names)
            else:  # not kept, but searched: a refusal names it
                found = replace(found, searched=(*found.searched, *more.searched))
        if alias is None and not ok:  # a respelling that did not help leaves the escalation as it was
            more, more_notes = _escalated(tools, found, route.suggested_queries, k)
            if more is not found:
                escalated, found = True, more
                ok = sufficient(clause, found.lexical, found.semantic, min_coverage, min_similarity, titles)
            notes.extend(more_notes)
    missing: tuple[str, ...] = ()
    if not ok and (found.lexical or found.semantic):
        held = held_texts(found.lexical, found.semantic, titles)
        missing = missing_names(clause, held)
        unheld = ", ".join(missing) or unheld_kind(
            clause, [*found.lexical[:10], *found.semantic[:10]], titles
        )
        if unheld:
            notes.append(f"Not in the books searched: {unheld}")
    if alias_only and not aliases and not (ok and names_in(clause)):
        ok = False
    relation = unheld_relation(clause, [h.text for h in found.hits[:k]]) if ok else None
    if relation is None and ok:
        relation = unheld_focus(clause, [h.text for h in (*found.lexical[:10], *found.semantic[:10])])
    if relation is None and ok:
        priced = (*found.hits[:k], *found.lexical[:10], *found.semantic[:10])
        relation = unheld_price(clause, list(dict.fromkeys(h.text for h in priced)))  # each text once
    if relation is not None:
        ok = False
        notes.append(relation)
    hits = tuple(found.hits[:k])
    return BookEvidence(
        hits, kind, found.scope, found.searched, ok and bool(hits), escalated, tuple(notes), missing, aliases
    )


def _slips_read(
    tools: BookTools, found: BookHits, k: int, titles: Sequence[str]
) -> tuple[BookHits, tuple[tuple[str, str], ...]]:
    """The clause searched again with the evidence's spelling of the words it writes with a slip
    (``word_respellings``: "parsely", "hosue", "recognise" for "recognize") that no book in play holds
    as asked nor the encoder knows as a word ("reset" is no slip of "rest"), and those pairs; ``found``
    and ``()`` when there are none, the budget is spent or the new search finds nothing. The caller
    keeps it only when the evidence rule finds it sufficient; else a refusal lists it."""
    if tools.budget.left <= 0:
        return found, ()
    texts = held_texts(found.lexical, found.semantic, titles)
    known = getattr(tools.encoder, "keeps_whole", lambda word: False)  # a real word is no slip
    slips = tuple(
        (asked, own)
        for asked, own in word_respellings(found.question, texts)
        if (spelling_variant(asked, own) or not known(asked))
        and not any(store.holds_phrase(asked) for store in tools.stores.values())
    )
    if not slips:
        return found, ()
    more = _book_hits(tools, renamed(found.question, slips), found.scope, k, 0.0)
    if not more.hits:
        return found, ()
    return replace(more, searched=(*found.searched, *more.searched)), slips


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


def _fusion(weight: float | int, rrf_k: int, name: str) -> HitFusion:
    return HitFusion(name, float(weight), int(rrf_k))


@config.when(llm="none", hybrid_fusion="convex")
def book_tools__none(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    search_k: int = 10,
    hybrid_lexical_weight: float | int = 0.7,
) -> BookTools:
    """The book tools over every library book, counted by the question's budget, cached in the session,
    searching as ``folio search`` does (convex fusion); chapter summaries and synopses are extractive."""
    fusion = _fusion(hybrid_lexical_weight, 60, "convex")
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, None, fusion)


@config.when(llm="none", hybrid_fusion="rrf")
def book_tools__none_rrf(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    search_k: int = 10,
    hybrid_lexical_weight: float | int = 0.7,
    hybrid_rrf_k: int = 60,
) -> BookTools:
    """``book_tools__none`` searching as ``folio search`` does with ``hybrid_fusion: rrf``."""
    fusion = _fusion(hybrid_lexical_weight, hybrid_rrf_k, "rrf")
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, None, fusion)


@config.when(llm="openai", hybrid_fusion="convex")
def book_tools__openai(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    llm_client: OpenAIChatClient,
    search_k: int = 10,
    hybrid_lexical_weight: float | int = 0.7,
) -> BookTools:
    """The book tools over every library book, counted by the question's budget, cached in the session,
    searching as ``folio search`` does (convex fusion); chapter summaries and synopses are map-reduce by
    the question's LLM client, each of its calls spent from the same budget (extractive when too few are
    left)."""
    summarizer = LLMSummarizer(llm_client, budget=tool_budget)
    fusion = _fusion(hybrid_lexical_weight, 60, "convex")
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, summarizer, fusion)


@config.when(llm="openai", hybrid_fusion="rrf")
def book_tools__openai_rrf(
    book_stores: dict,
    concept_maps: dict,
    encoder: object,
    tool_budget: ToolBudget,
    session: object,
    llm_client: OpenAIChatClient,
    search_k: int = 10,
    hybrid_lexical_weight: float | int = 0.7,
    hybrid_rrf_k: int = 60,
) -> BookTools:
    """``book_tools__openai`` searching as ``folio search`` does with ``hybrid_fusion: rrf``."""
    summarizer = LLMSummarizer(llm_client, budget=tool_budget)
    fusion = _fusion(hybrid_lexical_weight, hybrid_rrf_k, "rrf")
    return _tools(book_stores, concept_maps, encoder, tool_budget, session, search_k, summarizer, fusion)


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


def _clause_scope(tools: BookTools, clause: str, max_chapters: int) -> tuple[str, ...] | None:
    """The clause's candidate chapters from one concept-map lookup (None: none to boost)."""
    try:
        lookup = tools.concept_map_lookup(clause)
    except BudgetExceeded:
        lookup = ()
    return scope_chapters(lookup, max_chapters)


@config.when(answer_mode="pipeline")
def book_hits__pipeline(
    book_questions: tuple[RouteDecision, ...],
    book_tools: BookTools,
    search_k: int = 10,
    scope_boost: float | int = 0.1,
    scope_max_chapters: int = 8,
) -> tuple[BookHits, ...]:
    """Each book clause searched as ``folio search`` searches it (same lists, fusion, depth and
    tie-breaks) over all its routed books; the candidate chapters of one concept-map lookup (the scope)
    raised by ``scope_boost``, never searched alone."""
    out = []
    for r in book_questions:
        if asks_library(r):  # "Which books are in my library?": the catalogue answers, nothing to search
            out.append(BookHits(r.question, (), (), ()))
            continue
        tools = book_tools.for_books(r.book_ids)
        scope = _clause_scope(tools, r.question, int(scope_max_chapters))
        out.append(_book_hits(tools, r.question, scope, int(search_k), float(scope_boost)))
    return tuple(out)


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
    order = cross_encoder_order(rerank_model)
    return tuple(reranked(found, order, int(rerank_depth), "cross-encoder") for found in book_hits)


@config.when(rerank="llm", answer_mode="pipeline")
def ranked_hits__llm(
    book_hits: tuple[BookHits, ...], llm_client: OpenAIChatClient, rerank_depth: int = 20
) -> tuple[BookHits, ...]:
    """Each clause's first ``rerank_depth`` hits ordered by one bounded LLM call (ids only, validated);
    the search's order, with a note, when the call fails or its reply is invalid."""
    order = partial(llm_order, llm_client)
    return tuple(reranked(found, order, int(rerank_depth), "LLM") for found in book_hits)


@config.when(answer_mode="pipeline")
def book_evidence__pipeline(
    book_questions: tuple[RouteDecision, ...],
    ranked_hits: tuple[BookHits, ...],
    book_tools: BookTools,
    source_plan: tuple[tuple[str, str], ...],
    search_k: int = 10,
    evidence_min_coverage: float | int = 0.8,
    evidence_min_similarity: float | int = 0.44,
) -> tuple[BookEvidence, ...]:
    """Each book clause's evidence: its ranked hits judged by the evidence rule; insufficient evidence
    escalates once (the router's suggested queries searched in the whole books); a clause pointing back
    with a pronoun to names the clause before it missed is insufficient too. A clause not routed to the
    books that the plan also sends to another source is supported only through a book's own name for one
    of its names ("Little Red Riding Hood" as "Little Red-Cap"): otherwise that source answers it."""
    elsewhere = {clause for source, clause in source_plan if source != "book"}
    evidence = tuple(
        BookEvidence((), question_kind(r.question), None, (), False)  # the catalogue answers it
        if asks_library(r)
        else _judged(
            book_tools.for_books(r.book_ids),
            r,
            question_kind(r.question),
            found,
            int(search_k),
            float(evidence_min_coverage),
            float(evidence_min_similarity),
            r.route != "BOOK" and r.question in elsewhere,
        )
        for r, found in zip(book_questions, ranked_hits, strict=True)
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
