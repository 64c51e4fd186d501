"""Grounded answers: book results from evidence (extractive, LLM or agent) and the final ``Answer``.

- Extractive (``llm: none``): for each of the top ``answer_max_citations`` evidence chunks, its sentence
  sharing most content words with the question (earliest on ties), each on its own line followed by
  ``[n]``; citation ``n`` is that chunk (book, chapter, chunk id, chunk span).
- LLM (``llm: openai``, ``answer_mode: pipeline``): one chat call over the numbered excerpts (and any
  chapter summaries); the answer's ``[n]`` markers map to the excerpts, renumbered in order of first use.
  An answer without a valid marker, or a failed call, gives the extractive answer and a note.
- Agent (``answer_mode: agent``): the LLM calls the book tools through OpenAI tool calling, under the
  same budget; it cites locations as ``[BOOK_ID/CHUNK_ID]``, which must be chunks a tool returned. When
  the budget is spent, or the answer cites nothing valid, the answer is extractive over the chunks the
  tools returned, with a note.
- Evidence rule: no book-specific answer without retrieved evidence. Insufficient evidence (see
  ``nodes/book_tools.py``) gives "I could not find support for this in the books." and what was searched.

The final ``answer`` takes the fused text of all sources (``nodes/source_fusion.py``), their citations in
order, the route (one clause: its route; several: their common route or "MIXED"), the sources used, the
tool calls spent and the notes.

Config keys: ``answer_max_citations``, ``answer_mode`` and ``llm`` (variants); the LLM is ``llm_client``
(``nodes/llm.py``), whose every request spends one call of the question's tool budget.
Limitations: citation markers of a fused answer are renumbered within the book section only (other
sources do not use markers); the agent gets at most ``max_tool_calls`` steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hamilton.function_modifiers import config

from folio.nodes.backends.llm import LLMError
from folio.nodes.backends.tools import BookTools, BudgetExceeded, ToolBudget
from folio.nodes.text import coverage, question_kind, sentences, stems
from folio.nodes.types import (
    NO_RESULTS,
    SEMANTIC_UNAVAILABLE,
    Answer,
    BookEvidence,
    BookInfo,
    Citation,
    FusedContext,
    Hit,
    RouteDecision,
    SourceResult,
)

NOT_FOUND = "I could not find support for this in the books."
_MARKER = re.compile(r"\[(\d+)\]")
_LOCATION = re.compile(r"\[([^\[\]\s]+/[^\[\]\s]+)\]")

# --- pure helpers ------------------------------------------------------------------------------------


def _citation(hit: Hit) -> Citation:
    return Citation("book", hit.book_id, hit.chapter_id, hit.chapter_title, hit.chunk_id, hit.start, hit.end)


def _best_sentence(terms: frozenset[str], hit: Hit) -> tuple[float, str]:
    """The sentence of the chunk sharing most content words with the question (earliest on ties), and its
    coverage."""
    spans = sentences(hit.text)
    if not spans:
        return coverage(terms, hit.text), " ".join(hit.text.split())
    scores = [coverage(terms, hit.text[s:e]) for s, e in spans]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i))
    s, e = spans[best]
    return scores[best], " ".join(hit.text[s:e].split())


def _extractive(question: str, hits: Sequence[Hit], max_citations: int) -> tuple[str, tuple[Citation, ...]]:
    """The best supporting sentence of each top chunk, best-covering sentence first, each with its marker.

    Lines are ordered by how much of the question their sentence covers (retrieval rank breaks ties),
    so the most direct support is read first; the cited chunks are the top retrieved ones either way.
    """
    terms = stems(question)
    picked = [
        (_best_sentence(terms, hit), rank, hit) for rank, hit in enumerate(hits[: max(1, int(max_citations))])
    ]
    picked.sort(key=lambda item: (-item[0][0], item[1]))
    lines: list[str] = []
    citations: list[Citation] = []
    for (_, sentence), _, hit in picked:
        lines.append(f"{sentence} [{len(citations) + 1}]")
        citations.append(_citation(hit))
    return "\n".join(lines), tuple(citations)


def _not_found(searched: Sequence[str]) -> str:
    lines = [NOT_FOUND, "Searched:"]
    lines.extend(f"- {s}" for s in searched) if searched else lines.append("- nothing (no search could run)")
    return "\n".join(lines)


def _label(book_ids: Sequence[str], catalog: Sequence[BookInfo]) -> str:
    titles = {b.book_id: b.title for b in catalog}
    return " + ".join(titles.get(b, b) for b in book_ids)


def _cited(content: str, hits: Sequence[Hit]) -> tuple[str, tuple[Citation, ...]] | None:
    """The answer with its ``[n]`` markers renumbered in order of use; None when no marker is valid."""
    order: dict[int, int] = {}
    for m in _MARKER.finditer(content):
        n = int(m.group(1))
        if 1 <= n <= len(hits) and n not in order:
            order[n] = len(order) + 1
    if not order:
        return None
    text = _MARKER.sub(lambda m: f"[{order[int(m.group(1))]}]" if int(m.group(1)) in order else "", content)
    return text.strip(), tuple(_citation(hits[n - 1]) for n in order)


def _located(content: str, seen: dict[str, Hit]) -> tuple[str, tuple[Citation, ...]] | None:
    """An agent answer's ``[BOOK/CHUNK]`` markers as ``[n]`` over chunks a tool returned; None if none
    valid."""
    order: dict[str, int] = {}
    for m in _LOCATION.finditer(content):
        if m.group(1) in seen and m.group(1) not in order:
            order[m.group(1)] = len(order) + 1
    if not order:
        return None
    text = _LOCATION.sub(lambda m: f"[{order[m.group(1)]}]" if m.group(1) in order else "", content)
    return text.strip(), tuple(_citation(seen[loc]) for loc in order)


def _excerpts(hits: Sequence[Hit], max_chars: int = 1200) -> str:
    return "\n\n".join(
        f"[{i}] ({h.chapter_title or h.chapter_id}) {h.text[:max_chars]}" for i, h in enumerate(hits, 1)
    )


def _answer_messages(
    question: str, hits: Sequence[Hit], summaries: Sequence[tuple[str, str]]
) -> list[dict[str, str]]:
    context = _excerpts(hits)
    if summaries:
        context += "\n\nChapter summaries:\n" + "\n".join(f"- {s}" for _, s in summaries)
    return [
        {
            "role": "system",
            "content": "Answer the question only from the numbered excerpts. Put the excerpt number in "
            "square brackets, like [1], after every claim. If the excerpts do not answer it, say so.",
        },
        {"role": "user", "content": f"Question: {question}\n\nExcerpts:\n{context}"},
    ]


def _agent_messages(question: str, catalog: Sequence[BookInfo]) -> list[dict[str, Any]]:
    books = "\n".join(f"- {b.book_id}: {b.title} by {b.author}" for b in catalog)
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
    """The tool-calling loop; returns the model's final content ("" when it never finished) and notes."""
    messages = _agent_messages(question, catalog)
    notes: list[str] = []
    try:
        while True:
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
                try:
                    output = tools.call(call.name, call.arguments())
                except LLMError as exc:
                    if isinstance(exc, BudgetExceeded):
                        raise
                    output = json.dumps({"error": exc.reason})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    except BudgetExceeded as exc:
        notes.append(exc.reason)
    except LLMError as exc:
        notes.append(f"LLM agent failed: {exc}")
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
) -> SourceResult:
    return SourceResult(
        "book", _label(route.book_ids, catalog), text, tuple(citations), None, route.question, tuple(notes)
    )


def _extractive_result(
    route: RouteDecision,
    evidence: BookEvidence,
    catalog: Sequence[BookInfo],
    max_citations: int,
    notes: Sequence[str] = (),
) -> SourceResult:
    all_notes = (*evidence.notes, *notes)
    if not evidence.sufficient:
        return _book_result(route, _not_found(evidence.searched), (), catalog, all_notes)
    text, citations = _extractive(route.question, evidence.hits, max_citations)
    return _book_result(route, text, citations, catalog, all_notes)


def _route_name(routes: Sequence[RouteDecision]) -> str:
    names = {r.route for r in routes}
    return names.pop() if len(names) == 1 else "MIXED"


# --- nodes -------------------------------------------------------------------------------------------


@config.when(answer_mode="pipeline", llm="none")
def book_results__extractive(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    book_catalog: tuple[BookInfo, ...],
    answer_max_citations: int = 5,
) -> tuple[SourceResult, ...]:
    """Each book clause's extractive answer: its best supporting sentences, each cited."""
    return tuple(
        _extractive_result(r, ev, book_catalog, int(answer_max_citations))
        for r, ev in zip(book_questions, book_evidence, strict=True)
    )


@config.when(answer_mode="pipeline", llm="openai")
def book_results__llm(
    book_questions: tuple[RouteDecision, ...],
    book_evidence: tuple[BookEvidence, ...],
    chapter_summaries: tuple[tuple[str, str], ...],
    book_catalog: tuple[BookInfo, ...],
    llm_client: Any,
    answer_max_citations: int = 5,
) -> tuple[SourceResult, ...]:
    """Each book clause's LLM answer over its evidence, ``[n]`` markers mapped to excerpts."""
    out = []
    for r, ev in zip(book_questions, book_evidence, strict=True):
        if not ev.sufficient:
            out.append(_extractive_result(r, ev, book_catalog, int(answer_max_citations)))
            continue
        hits = ev.hits[: max(1, int(answer_max_citations)) + 2]
        try:
            content = llm_client.chat(_answer_messages(r.question, hits, chapter_summaries)).content
            cited = _cited(content, hits)
            note = "LLM answer cited no excerpt: extractive answer given" if cited is None else ""
        except LLMError as exc:
            cited, note = None, f"LLM answer failed ({exc.reason}): extractive answer given"
        if cited is None:
            out.append(_extractive_result(r, ev, book_catalog, int(answer_max_citations), (note,)))
        else:
            out.append(_book_result(r, cited[0], cited[1], book_catalog, ev.notes))
    return tuple(out)


@config.when(answer_mode="agent")
def book_results__agent(
    book_questions: tuple[RouteDecision, ...],
    book_tools: BookTools,
    book_catalog: tuple[BookInfo, ...],
    llm_client: Any,
    answer_max_citations: int = 5,
) -> tuple[SourceResult, ...]:
    """Each book clause answered by the LLM calling the book tools (same budget and evidence rule)."""
    out = []
    for r in book_questions:
        tools = book_tools.for_books(r.book_ids)
        content, notes = _agent_run(
            llm_client, tools, r.question, [b for b in book_catalog if b.book_id in r.book_ids]
        )
        if tools.semantic_error is not None and SEMANTIC_UNAVAILABLE not in notes:
            notes.append(SEMANTIC_UNAVAILABLE)
        cited = _located(content, tools.seen) if content else None
        if cited is not None:
            out.append(_book_result(r, cited[0], cited[1], book_catalog, notes))
            continue
        ranked = _ranked_seen(r.question, tools.seen)
        evidence = BookEvidence(
            tuple(ranked),
            question_kind(r.question),
            None,
            tuple(
                f"agent tool calls: {', '.join(tools.budget.calls)}",
            ),
            bool(ranked),
        )
        if content:
            notes.append("agent answer cited no retrieved excerpt: extractive answer given")
        out.append(_extractive_result(r, evidence, book_catalog, int(answer_max_citations), notes))
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
    text = fused_context.text
    if not kept:
        not_found = [r.text for r in source_results if r.source == "book" and r.text.startswith(NOT_FOUND)]
        text = not_found[0] if not_found else NO_RESULTS
    notes: list[str] = []
    for r in routes:
        if r.reason.startswith(("AMBIGUOUS", "LLM router failed")):
            notes.append(f"router: {r.reason}")
    if any(r.route == "NOT_BOOK" for r in routes) and any(r.source == "book" for r in source_results):
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
