"""How results read on a terminal: answers with citations, Kiwix results with their scores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from folio.nodes.core.types import Answer, Citation
from folio.nodes.readers.common import location_text

if TYPE_CHECKING:
    from folio.nodes.core.kiwix_types import KiwixResult


def _citation_line(n: int, c: Citation) -> str:
    if c.kind == "book":
        where = location_text(c) or c.chapter_title or c.chapter_id
        return f"[{n}] {where} — {c.book_id} {c.chunk_id} (chars {c.start}–{c.end})"
    if c.kind == "kiwix":
        where = f"{c.title} › {c.section}" if c.section else c.title
        return f"[{n}] {where} — {c.url or f'zim://{c.zim}/{c.path}'}"
    return f"[{n}] {c.title} — {c.url}"


def format_answer(result: Answer) -> str:
    """The answer as plain text: answer, citations (with the quoted text when the answer does not show it),
    route line, notes."""
    lines = [result.answer, ""]
    if result.citations:
        lines.append("citations:")
        for i, c in enumerate(result.citations, 1):
            lines.append("  " + _citation_line(i, c))
            if c.quote and c.quote not in result.answer:  # an LLM's answer: what it read there
                lines.append(f"      “{_shorten(c.quote, 200)}”")
    lines.append(
        f"route: {result.route} · sources: {', '.join(result.sources_used) or 'none'} · "
        f"tool calls: {result.tool_calls}"
    )
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def format_kiwix_result(result: KiwixResult, max_candidates: int = 10, excerpt_chars: int = 160) -> str:
    """The result for a person: books, ranked candidates with each signal's points, then the answer
    (each book's passage: article, section, URL) and its text."""
    lines = [f"query:         {result.query}", f"search terms:  {result.search_terms or '(none)'}"]
    lines.append("books searched: " + (", ".join(result.searched_books) or "(none)"))
    for old, new in result.superseded_books:
        lines.append(f"  not searched: {old} (older edition of {new})")
    selected = [f"{b} (primary)" if i == 0 else b for i, b in enumerate(result.selected_books)]
    lines.append("selected books: " + (", ".join(selected) or "(no book found anything)"))
    shown = result.candidates[:max_candidates]
    lines.append(f"\ncandidates (top {len(shown)} of {len(result.candidates)}; score = sum of the signals):")
    for i, s in enumerate(shown, 1):
        c = s.candidate
        lines.append(f"  {i:2d}. {s.score:6.2f}  {c.title}")
        lines.append(f"             {c.book} : {c.path}  (found by {c.origin})")
        signals = "  ".join(f"{name}={points:+g}" for name, points in s.breakdown) or "(no signal fired)"
        lines.append(f"             {signals}")
        if c.excerpt:
            lines.append(f"             “{_shorten(c.excerpt, excerpt_chars)}”")
    if result.errors:
        lines.append("\nerrors:")
        lines.extend(f"  {src}: {reason}" for src, reason in result.errors)
    lines.append("\nanswer:" if result.context.sections else "\nanswer: (none)")
    for section in result.context.sections:
        where = f"{section.title} › {section.section}" if section.section else section.title
        lines.append(f"  [{section.source}] {where} ({section.score:g}) — {section.url}")
    lines.append(result.context.text or "(no context)")
    return "\n".join(lines)


def _shorten(text: str, max_chars: int) -> str:
    """``text`` on one line in at most ``max_chars`` characters; a "lead … passage" excerpt keeps
    the start of both parts."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    if " … " in flat:
        lead, passage = flat.split(" … ", 1)
        half = max_chars // 2
        return f"{_shorten(lead, half).removesuffix(' …')} … {_shorten(passage, max_chars - half)}"
    return flat[: max_chars - 1].rsplit(" ", 1)[0] + " …"
