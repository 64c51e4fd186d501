"""Grounded answers: book results from evidence (extractive, LLM or agent) and the final ``Answer``.

- Reader (``book_passages``): each book clause's evidence read by ``nodes/core/reading.py`` into ranked
  passages (at most ``answer_max_citations``): the best sentences of the top evidence chunks with the
  neighbours they need to read on their own, in book order, each at most ``answer_max_words`` words,
  sentences read from the chapter text (``book_stores``) so that overlapping chunks give each once.
- Extractive (``llm: none``): the best passage, and a second one from elsewhere only when it scores
  close to the best and both fit ``answer_max_words``; one line per passage, each sentence followed by
  ``[n]``; citation ``n`` is that sentence (book, chapter, the chunk it was read from, the sentence's
  chapter offsets, its text as ``quote``).
- LLM (``llm: openai``, ``answer_mode: pipeline``): one chat call over the numbered passages (and any
  chapter summaries), asked for at most ``answer_max_words`` words and bounded to
  ``ANSWER_TOKENS_PER_WORD`` tokens a word (``nodes/core/citing.py``; a reply cut there keeps its
  finished sentences; HTML entities a server's template put in are decoded); the answer's ``[n]``
  markers map to the passages (citation: the passage's span and text), renumbered in order of first
  use. An answer without a valid marker, one that echoes its instructions, or a failed call gives the
  extractive answer and a note.
- Agent (``answer_mode: agent``): the LLM calls the book tools through OpenAI tool calling, under the
  same budget and the pipeline's single escalation (one widening from chosen chapters to the whole
  books; a second is refused and the model reads why);
  it cites locations as ``[BOOK_ID/CHUNK_ID]``, which must be chunks a tool returned (the
  citation is the chunk). When the budget is spent, or the answer cites nothing valid, the answer is
  the extractive one read from the chunks the tools returned, with a note.
- Outside the books (a NOT_BOOK clause that no other source could take, sent to the books by the
  source plan): with an LLM, the LLM answers it from general knowledge without book tools, and the
  answer starts with ``NOT_FROM_BOOKS`` (source ``llm``); without one, the books are searched and the
  answer notes that no other source was configured.
- Evidence rule: no book-specific answer without retrieved evidence. Insufficient evidence (see
  ``nodes/query/book_flow.py``) gives "I could not find support for this in the books." and what was searched.

The final ``answer`` takes the fused text of all sources (``nodes/query/source_fusion.py``), their
citations in
order, the route (one clause: its route; several: their common route or "MIXED"), the sources used, the
tool calls spent and the notes.

Config keys: ``answer_max_words`` (words of a passage and of an extractive answer),
``answer_max_citations`` (passages read: the LLM's excerpts), ``answer_mode`` and ``llm`` (variants);
the LLM is ``llm_client`` (``nodes/query/llm_connection.py``), whose every request spends one call of the
question's
tool budget; ``encoder`` (an input; None: the reader scores by words and the question's kind only).
Limitations: citation markers of a fused answer are renumbered within the book section only (other
sources do not use markers); the agent gets at most ``max_tool_calls`` steps; the reader's limits are
in ``nodes/core/reading.py``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from hamilton.function_modifiers import config

from folio.nodes.backends.book_tools import BookTools, BudgetExceeded, ToolBudget, invalid_tool_call
from folio.nodes.backends.llm import LLMError
from folio.nodes.backends.summaries import synopsis_header
from folio.nodes.core.citing import (
    answer_messages,
    answer_tokens,
    cited_answer,
    echoes,
    located_answer,
    quote_citation,
    reply_text,
)
from folio.nodes.core.evidence import renamed
from folio.nodes.core.reading import Passage, Quote, answer_passages, first_mentioned, read_book
from folio.nodes.core.subjects import off_subject, passing_subject
from folio.nodes.core.text import coverage, stems
from folio.nodes.core.types import (
    NO_RESULTS,
    SEMANTIC_UNAVAILABLE,
    Answer,
    BookEvidence,
    BookInfo,
    ChapterSummary,
    Citation,
    FusedContext,
    Hit,
    RouteDecision,
    SourceResult,
)
from folio.nodes.core.whole_book import Overview, asks_library, is_whole_book, library_answer, overview

T = TypeVar("T")

NOT_FOUND = "I could not find support for this in the books."
AGENT_RESERVE = 2  # budget calls the agent leaves for the extractive fallback's two searches
AGENT_UNCITED = "agent answer cited no retrieved excerpt: extractive answer given"
LLM_ECHO = "LLM answer repeated its instructions: extractive answer given"

# --- pure helpers ------------------------------------------------------------------------------------


def _extractive(passages: Sequence[Passage], max_words: int) -> tuple[str, tuple[Citation, ...]]:
    """The answer's passages (``reading.answer_passages``), one line each, every sentence with its marker."""
    lines: list[str] = []
    citations: list[Citation] = []
    for p in answer_passages(passages, max_words):
        parts = []
        for q in p.quotes:
            citations.append(quote_citation(q))
            parts.append(f"{q.text} [{len(citations)}]")
        lines.append(" ".join(parts))
    return "\n".join(lines), tuple(citations)


def _per_chapter(
    book_stores: dict[str, Any], read: Callable[[Any, str], T], missing: T
) -> Callable[[str, str], T]:
    """``(book_id, chapter_id) -> read(store, chapter_id)``, memoised per chapter; ``missing`` when the
    book is not in ``book_stores`` or its store fails (a broken store: the reader falls back to the
    chunks' own text, and citations keep the chunk the reader gave)."""
    cache: dict[tuple[str, str], T] = {}

    def lookup(book_id: str, chapter_id: str) -> T:
        if (book_id, chapter_id) not in cache:
            store = book_stores.get(book_id)
            try:
                cache[(book_id, chapter_id)] = read(store, chapter_id) if store is not None else missing
            except Exception:
                cache[(book_id, chapter_id)] = missing
        return cache[(book_id, chapter_id)]

    return lookup


def _read(
    question: str,
    evidence: BookEvidence,
    book_stores: dict[str, Any],
    encoder: Any,
    max_words: int,
    max_passages: int,
) -> tuple[Passage, ...]:
    if not evidence.sufficient:
        return ()
    asked = renamed(question, evidence.aliases)  # the book's names: "Little Red-Cap", "Mittens"
    passages = read_book(
        asked,
        first_mentioned(asked, evidence.hits, lambda book, name: book_stores[book].first_holding(name)),
        _per_chapter(book_stores, lambda store, chapter_id: store.chapter_text(chapter_id), None),
        encoder,
        max_words,
        max(1, max_passages),
    )
    chunks = _per_chapter(book_stores, lambda store, chapter_id: tuple(store.chunks_in([chapter_id])), ())
    return _in_chunks(passages, chunks)


def _in_chunks(
    passages: Sequence[Passage], chunks: Callable[[str, str], tuple[Hit, ...]]
) -> tuple[Passage, ...]:
    """Each quote cited by a chunk that holds all of it: a sentence read across a chunk's start (chunks
    overlap and start mid-sentence) is cited by the chunk before, which holds it whole."""

    def held(q: Quote) -> Quote:
        holding = [h for h in chunks(q.book_id, q.chapter_id) if h.start <= q.start and q.end <= h.end]
        if not holding or any(h.chunk_id == q.chunk_id for h in holding):
            return q
        return replace(q, chunk_id=holding[0].chunk_id)

    return tuple(replace(p, quotes=tuple(held(q) for q in p.quotes)) for p in passages)


def _whole_book(route: RouteDecision, tools: BookTools) -> str | None:
    """The book a whole-book clause asks about: its one routed book, else the routed book whose title
    shares most words with the clause (None: none shares one)."""
    ids = [b for b in route.book_ids if b in tools.stores] or list(tools.stores)
    if len(ids) == 1:
        return ids[0]
    asked = stems(route.question)
    shared = {b: len(asked & stems(str(tools.stores[b].descriptor.get("title", "")))) for b in ids}
    best = max(ids, key=lambda b: shared[b], default=None)
    return best if best is not None and shared[best] > 0 else None


def _overview(
    route: RouteDecision, evidence: BookEvidence, tools: BookTools, max_words: int
) -> Overview | None:
    """A whole-book clause's overview from its book's synopsis line and chapter summaries
    (``nodes/core/whole_book.py``); None for any other clause, or one naming what no book holds."""
    book_id = None if evidence.missing_names else _whole_book(route, tools)
    title = str(tools.stores[book_id].descriptor.get("title", "")) if book_id is not None else ""
    if book_id is None or not is_whole_book(route.question, title):
        return None
    view, cmap = tools.stores[book_id], tools.concept_maps.get(book_id)
    chapters = []
    for c in view.descriptor.get("chapters", ()):
        try:
            summary = tools.summary_of(c["chapter_id"]).text
        except Exception:  # a summary that cannot be made or read: the chapter's own sentences only
            summary = ""
        chapters.append((c["chapter_id"], c["title"], view.chapter_text(c["chapter_id"]), summary))
    characters = [e.name for e in cmap.entities[:6]] if cmap is not None else []
    line = synopsis_header(view.descriptor).rstrip(".")
    return overview(route.question, book_id, line, characters, chapters, max_words)


WHY_PREFIXES = ("Not in the books searched", "Found ")  # evidence notes a refusal says (what was (not) found)


def _not_found(searched: Sequence[str], why: Sequence[str] = ()) -> str:
    lines = [NOT_FOUND, *why, "Searched:"]
    lines.extend(f"- {s}" for s in searched) if searched else lines.append("- nothing (no search could run)")
    return "\n".join(lines)


def _label(book_ids: Sequence[str], catalog: Sequence[BookInfo]) -> str:
    titles = {b.book_id: b.title for b in catalog}
    return " + ".join(titles.get(b, b) for b in book_ids)


def _agent_messages(question: str, catalog: Sequence[BookInfo]) -> list[dict[str, Any]]:
    books = "\n".join(f"- {b.book_id}: {b.describe()}" for b in catalog)
    return [
        {
            "role": "system",
            "content": "You answer questions about the user's books with the book tools. Search before "
            "answering; answer only from tool results, citing each claim with the location_id of its "
            f"excerpt in square brackets, like [book/chunk]. Books:\n{books}",
        },
        {"role": "user", "content": question},
    ]


def _agent_run(
    client: Any, tools: BookTools, question: str, catalog: Sequence[BookInfo]
) -> tuple[str, list[str]]:
    """The tool-calling loop; returns the model's final content ("" when it never finished) and notes.

    A tool call with an unknown name or empty/invalid arguments is not run: the model gets the error as
    the tool's result, which spends one call of the budget. The loop stops while ``AGENT_RESERVE``
    calls are left, for the extractive fallback."""
    messages = _agent_messages(question, catalog)
    notes: list[str] = []
    try:
        while True:
            if tools.budget.left <= AGENT_RESERVE:
                return "", notes
            result = client.chat(messages, tools=tools.definitions())
            if not result.tool_calls:
                return result.content, notes
            messages.append(
                {
                    "role": "assistant",
                    "content": result.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments_json},
                        }
                        for c in result.tool_calls
                    ],
                }
            )
            for call in result.tool_calls:
                invalid = invalid_tool_call(call.name, call.arguments_json)
                if invalid is not None:
                    tools.budget.spend("invalid tool call")
                    output = json.dumps({"error": f"{call.name}: {invalid}; nothing was run"})
                else:
                    output = tools.call(call.name, call.arguments())
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    except BudgetExceeded as exc:
        notes.append(exc.reason)
    except LLMError as exc:
        notes.append(f"LLM agent failed: {exc.reason}")
    return "", notes


def _ranked_seen(question: str, seen: dict[str, Hit]) -> list[Hit]:
    terms = stems(question)
    return sorted(seen.values(), key=lambda h: (-coverage(terms, h.text), -h.score, h.book_id, h.start))


def _book_result(
    route: RouteDecision,
    text: str,
    citations: Sequence[Citation],
    catalog: Sequence[BookInfo],
    notes: Sequence[str],
    evidence: BookEvidence | None = None,
) -> SourceResult:
    """A book clause's result, ``off_subject`` (``subjects.off_subject``) by the evidence chunks it cites
    (``nodes/query/source_fusion.py`` asks Kiwix then, and a Kiwix article holding the subject answers
    instead); refused when its names are a mention in passing (``subjects.passing_subject``)."""
    label = _label(route.book_ids, catalog)
    cited = {c.chunk_id for c in citations}
    chunks = [h.text for h in evidence.hits if h.chunk_id in cited] if evidence is not None else []
    held = [f"{h.text} {h.chapter_title}" for h in evidence.hits] if evidence is not None else []
    if evidence is not None and (passing := passing_subject(route.question, text, chunks, held)):
        why = [*(n for n in evidence.notes if n.startswith(WHY_PREFIXES)), passing]
        text, citations, notes = _not_found(evidence.searched, why), (), (*notes, passing)
    off = bool(chunks) and bool(citations) and off_subject(route.question, text, chunks)
    return SourceResult("book", label, text, tuple(citations), None, route.question, tuple(notes), off)


NOT_FROM_BOOKS = "Not from your books (the LLM's general knowledge):"


def _general_messages(question: str, max_words: int) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": f"Answer the question in at most {max_words} words from general knowledge. "
            "If you do not know, say so.",
        },
        {"role": "user", "content": question},
    ]


def _general_result(route: RouteDecision, llm_client: Any, max_words: int) -> SourceResult:
    """A NOT_BOOK clause no other source could take, answered by the LLM without book tools; the
    answer says that it is not from the books (a failed call is the source's error)."""
    try:
        reply = llm_client.chat(
            _general_messages(route.question, max_words), max_tokens=answer_tokens(llm_client, max_words)
        )
    except LLMError as exc:
        return SourceResult("llm", "general knowledge", "", error=exc.reason, clause=route.question)
    text = reply_text(reply.content, reply.truncated).strip()
    return SourceResult("llm", "general knowledge", f"{NOT_FROM_BOOKS} {text}", (), None, route.question)


def _extractive_result(
    route: RouteDecision,
    evidence: BookEvidence,
    passages: Sequence[Passage],
    catalog: Sequence[BookInfo],
    max_words: int,
    notes: Sequence[str] = (),
) -> SourceResult:
    all_notes = (*evidence.notes, *notes)
    if not evidence.sufficient:
        why = [n for n in evidence.notes if n.startswith(WHY_PREFIXES)]
        return _book_result(route, _not_found(evidence.searched, why), (), catalog, all_notes)
    text, citations = _extractive(passages, max_words)
    return _book_result(route, _named(evidence, text), citations, catalog, all_notes, evidence)


def _overview_result(
    route: RouteDecision,
    evidence: BookEvidence,
    found: Overview,
    passages: Sequence[Passage],
    catalog: Sequence[BookInfo],
) -> SourceResult:
    """A whole-book clause's answer: the overview's synopsis lines, then one line per sentence after its
    chapter's title, each cited."""
    quotes = [q for p in passages for q in p.quotes]
    text = "\n".join(f"{q.chapter_title}: {q.text} [{i}]" for i, q in enumerate(quotes, 1))
    notes = (*evidence.notes, "Whole-book question: answered from the synopsis and chapter summaries")
    citations = tuple(quote_citation(q) for q in quotes)
    return _book_result(route, "\n".join((*found.lines, text)), citations, catalog, notes)


def _named(evidence: BookEvidence, text: str) -> str:
    """The answer, first saying which name the book uses for a name of the question it spells otherwise."""
    said = [f'The book calls {name} "{own}".' for name, own in evidence.aliases if own[:1].isupper()]
    return "\n".join([*said, text]) if said else text


def _refusal(results: Sequence[SourceResult]) -> str:
    """The answer when no source answered: the books' "could not find" (or, without a book search, no
    source's), then every search made: the books' searches (which books, for what) and each other
    source's (which archives or engine, for what, and what it said)."""
    lines: list[str] = []
    why: list[str] = []
    books = False
    for r in results:
        if r.source == "book" and r.text.startswith(NOT_FOUND):
            books = True
            body = r.text.splitlines()[1:]
            cut = body.index("Searched:") if "Searched:" in body else 0
            why.extend(body[:cut])
            lines.extend(line for line in body[cut:] if line.startswith("- "))
        elif r.error:
            lines.append(
                f"- {r.source} for {r.clause!r}: failed ({r.error})" if r.clause else f"- {r.source}: failed"
            )
        elif r.source != "book":
            said = " ".join(r.text.split()[:12]) or "nothing"
            where = f"{r.source} ({r.label})" if r.label and r.label != r.source else r.source
            lines.append(f"- {where} for {r.clause!r}: {said}")
    lines = list(dict.fromkeys(lines)) or ["- nothing (no source could run)"]
    head = NOT_FOUND if books else NO_RESULTS
    return "\n".join([head, *dict.fromkeys(why), "Searched:", *lines])


def _route_name(routes: Sequence[RouteDecision]) -> str:
    names = {r.route for r in routes}
    return names.pop() if len(names) == 1 else "MIXED"


# --- nodes -------------------------------------------------------------------------------------------


@config.when(answer_mode="pipeline")
def book_overviews__pipeline(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    book_tools: BookTools,
    answer_max_words: int = 60,
) -> tuple[Overview | None, ...]:
    """Each whole-book clause ("what is the book about", "how does X change", "its themes") answered
    from its book's synopsis line and chapter summaries, citing the chapters it quotes; None for every
    other clause (the reader answers those)."""
    return tuple(
        _overview(r, ev, book_tools.for_books(r.book_ids), int(answer_max_words))
        for r, ev in zip(book_questions, book_evidence, strict=True)
    )


@config.when(answer_mode="pipeline")
def book_passages__pipeline(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    book_overviews: tuple[Overview | None, ...],
    book_stores: dict,
    encoder: Any,
    answer_max_words: int = 60,
    answer_max_citations: int = 5,
) -> tuple[tuple[Passage, ...], ...]:
    """Each book clause's evidence read into ranked passages (none when the evidence is insufficient);
    a whole-book clause's passage is its overview's."""
    chunks = _per_chapter(book_stores, lambda store, chapter_id: tuple(store.chunks_in([chapter_id])), ())
    return tuple(
        _in_chunks((o.passage,), chunks)
        if o is not None
        else _read(r.question, ev, book_stores, encoder, int(answer_max_words), int(answer_max_citations))
        for r, ev, o in zip(book_questions, book_evidence, book_overviews, strict=True)
    )


@config.when(answer_mode="pipeline", llm="none")
def book_results__extractive(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    book_passages: tuple[tuple[Passage, ...], ...],
    book_overviews: tuple[Overview | None, ...],
    book_catalog: tuple[BookInfo, ...],
    answer_max_words: int = 60,
) -> tuple[SourceResult, ...]:
    """Each book clause's extractive answer: the reader's best passage(s), every sentence cited; a
    whole-book clause's: its synopsis line, then the chapter sentences of its overview, each cited."""
    return tuple(
        library_answer(r, book_catalog)
        if asks_library(r)
        else _extractive_result(r, ev, ps, book_catalog, int(answer_max_words))
        if o is None
        else _overview_result(r, ev, o, ps, book_catalog)
        for r, ev, ps, o in zip(book_questions, book_evidence, book_passages, book_overviews, strict=True)
    )


@config.when(answer_mode="pipeline", llm="openai")
def book_results__llm(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    book_passages: tuple[tuple[Passage, ...], ...],
    chapter_summaries: tuple[ChapterSummary, ...],
    book_catalog: tuple[BookInfo, ...],
    llm_client: Any,
    answer_max_words: int = 60,
) -> tuple[SourceResult, ...]:
    """Each book clause's LLM answer over the reader's passages, ``[n]`` markers mapped to passages;
    the notes of the chapter summaries in its prompt are its notes too."""
    out = []
    max_words = int(answer_max_words)
    summary_notes = tuple(dict.fromkeys(n for s in chapter_summaries for n in s.notes))
    for r, ev, passages in zip(book_questions, book_evidence, book_passages, strict=True):
        if asks_library(r):  # the catalogue answers, not the LLM
            out.append(library_answer(r, book_catalog))
            continue
        if r.route == "NOT_BOOK" and not (ev.sufficient and passages):
            # the books do not hold it (a book may under another name: issue 27's alias): the LLM
            # answers, not from the books
            out.append(_general_result(r, llm_client, max_words))
            continue
        if not ev.sufficient or not passages:
            out.append(_extractive_result(r, ev, passages, book_catalog, max_words))
            continue
        messages = answer_messages(r.question, passages, chapter_summaries, max_words)
        try:
            reply = llm_client.chat(messages, max_tokens=answer_tokens(llm_client, max_words))
            content = reply_text(reply.content, reply.truncated)
            echo = echoes(content, messages[0]["content"])
            cited = None if echo else cited_answer(content, passages)
            note = LLM_ECHO if echo else "LLM answer cited no excerpt: extractive answer given"
        except LLMError as exc:
            cited, note = None, f"LLM answer failed ({exc.reason}): extractive answer given"
        if cited is None:
            out.append(_extractive_result(r, ev, passages, book_catalog, max_words, (*summary_notes, note)))
        else:
            out.append(
                _book_result(r, _named(ev, cited[0]), cited[1], book_catalog, (*ev.notes, *summary_notes), ev)
            )
    return tuple(out)


@config.when(answer_mode="agent")
def book_results__agent(
    book_questions: tuple[RouteDecision, ...],
    book_tools: BookTools,
    book_catalog: tuple[BookInfo, ...],
    book_stores: dict,
    encoder: Any,
    llm_client: Any,
    fallback_evidence: Callable[[BookTools, str], BookEvidence],
    answer_max_words: int = 60,
    answer_max_citations: int = 5,
) -> tuple[SourceResult, ...]:
    """Each book clause answered by the LLM calling the book tools (same budget and evidence rule); when
    it cites no excerpt a tool returned, the extractive answer from a whole-book search, with a note."""
    out = []
    max_words = int(answer_max_words)
    for r in book_questions:
        if asks_library(r):  # the catalogue answers, not the agent
            out.append(library_answer(r, book_catalog))
            continue
        if r.route == "NOT_BOOK":  # no other source took it: the LLM answers, not from the books
            out.append(_general_result(r, llm_client, max_words))
            continue
        tools = (chosen := book_tools.for_books(r.book_ids)).escalating(1)  # one widening, as the pipeline
        content, notes = _agent_run(
            llm_client, tools, r.question, [b for b in book_catalog if b.book_id in r.book_ids]
        )
        if tools.semantic_error is not None and SEMANTIC_UNAVAILABLE not in notes:
            notes.append(SEMANTIC_UNAVAILABLE)
        cited = located_answer(html.unescape(content), tools.seen) if content else None
        if cited is not None:
            out.append(_book_result(r, cited[0], cited[1], book_catalog, notes))
            continue
        notes.append(AGENT_UNCITED)
        evidence = fallback_evidence(chosen, r.question)  # the pipeline's own whole-book search
        ranked = _ranked_seen(r.question, tools.seen)
        if not evidence.hits and ranked:  # the budget left no fallback search: the agent's own finds
            evidence = replace(evidence, hits=tuple(ranked), sufficient=True)
        passages = _read(r.question, evidence, book_stores, encoder, max_words, int(answer_max_citations))
        out.append(_extractive_result(r, evidence, passages, book_catalog, max_words, notes))
    return tuple(out)


def answer(
    question: str,
    routes: tuple[RouteDecision, ...],
    fused_context: FusedContext,
    source_results: tuple[SourceResult, ...],
    tool_budget: ToolBudget,
) -> Answer:
    """The answer: fused text, citations in order, route, sources used, tool calls and notes."""
    kept = fused_context.results
    text = fused_context.text if kept else _refusal(source_results)
    notes: list[str] = []
    for r in routes:
        if r.reason.startswith(("AMBIGUOUS", "LLM router failed")):
            notes.append(f"router: {r.reason}")
    to_books = {r.clause for r in source_results if r.source == "book"}
    elsewhere = {r.clause for r in source_results if r.source != "book"}
    if any(r.route == "NOT_BOOK" and r.question in to_books - elsewhere for r in routes):
        notes.append(
            "no other source is configured or reachable for a question outside the books: searched the books"
        )
    for result in source_results:
        notes.extend(result.notes)
    notes.extend(fused_context.notes)
    if tool_budget.refused:
        notes.append(f"tool budget: {len(tool_budget.refused)} call(s) refused after {tool_budget.limit}")
    return Answer(
        question=question,
        answer=text,
        citations=tuple(c for r in kept for c in r.citations),
        route=_route_name(routes),
        sources_used=tuple(dict.fromkeys(r.source for r in kept)),
        tool_calls=tool_budget.used,
        notes=tuple(dict.fromkeys(notes)),
        routes=routes,
    )
