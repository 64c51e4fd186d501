"""Chapter summaries and book synopses: extractive, or map-reduce with an LLM (bounded calls).

Extractive (no LLM; summariser id ``EXTRACTIVE_ID``): chunk → section (``SECTION_CHUNKS`` chunks, at
most ``MAX_SECTIONS``) → chapter, each step keeping the sentences that share most content words with
the rest of their text (``central_sentences``), in text order, laid out as the LLM summaries are (the
design's shape): one section gives its ``SUMMARY_SENTENCES`` sentences alone; several give an overview
of as many sentences, then one ``Part i of n (chunks a–b): …`` line of a few sentences per section
(before issue 32: the three sentences of the overview only, whatever the chapter's length).

With an LLM (``LLMSummarizer``; summariser id ``llm:<model>:v<PROMPT_VERSION>``), a chapter is
map-reduce in three levels, with at most ``MAX_SECTIONS + 1`` LLM calls per chapter:

1. chunk (map, no LLM): each chunk condensed to its ``DIGEST_SENTENCES`` central sentences;
2. section (one LLM call each): consecutive chunks grouped into at most ``MAX_SECTIONS`` sections
   (``section_ranges``: ``LLM_SECTION_CHUNKS`` chunks each, more when the chapter is long); the
   section's digests (at most ``SECTION_CHARS`` characters) summarised;
3. chapter (one LLM call, only with two sections or more): the section summaries, under their
   headings, reduced to an overview.

The result has stable headings written by Folio, never by the model: one section gives its summary
alone; several give the overview, then one line per section, ``Part i of n (chunks a–b): …``
(``section_heading``), so every model and run lays a summary out the same way. A synopsis is built
from chapter summaries the same way: the chapters in at most ``MAX_SECTIONS`` groups (one call each,
or a single call when all fit one prompt), then one reduce call, under ``Chapters a–b`` headings.

Every LLM reply is cleaned (``clean_reply``: markdown and "Summary:" labels dropped, at most
``SUMMARY_WORDS`` words ending at a sentence); an empty reply is an ``LLMError``, so callers fall back
to the extractive summary. ``LLMSummarizer.chapter_calls(n)`` says beforehand how many calls a chapter
of ``n`` chunks costs (callers check it against the question's tool budget).

Limitations: the chunk level is extractive (an LLM call per chunk would make a long chapter cost
dozens of calls); a section prompt carries at most ``SECTION_CHARS`` characters of digests, so a very
long chapter is summarised from its most central sentences only; prompts are English.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from folio.nodes.backends.llm import LLMError
from folio.nodes.core.text import content_words, sentences
from folio.nodes.core.types import Deadline

SECTION_CHUNKS = 8  # extractive: chunks per section
SUMMARY_SENTENCES = 3  # extractive: sentences kept per section and per chapter
EXTRACTIVE_ID = "extractive-v3"  # bump when the extractive method changes (stored summaries keyed by it)

PROMPT_VERSION = 1  # bump when a prompt or the layout changes (stored LLM summaries keyed by it)
LLM_SECTION_CHUNKS = 4  # chunks per LLM section (a long chapter gets more, to stay within MAX_SECTIONS)
MAX_SECTIONS = 4  # so one chapter summary is at most MAX_SECTIONS + 1 LLM calls
DIGEST_SENTENCES = 4  # central sentences kept per chunk for the section prompt
SECTION_CHARS = 4_000  # the most digest text one prompt carries
SUMMARY_WORDS = 150  # the most words kept of one reply
SUMMARY_TOKENS = 256  # max_tokens of one summary request (or the client's llm_max_tokens when lower)
DEADLINE_SECONDS = 120.0  # one summary request's LLM calls together (an ask's own deadline may be sooner)

SYSTEM = (
    "You summarise passages of a book faithfully. Use only the text given. Write plain prose in the past "
    "or present tense, without headings, lists or commentary."
)


@dataclass(frozen=True)
class Summary:
    """A chapter summary or synopsis: its text, the summariser that made it, whether this request
    computed it (False: read back from the library's store or this process's memory) and notes (an
    LLM summary that fell back to the extractive one, a store that could not be written)."""

    text: str
    summariser: str
    computed: bool
    notes: tuple[str, ...] = ()


# --- extractive ---------------------------------------------------------------------------------------


def central_sentences(text: str, n: int = SUMMARY_SENTENCES) -> list[str]:
    """The ``n`` sentences of ``text`` sharing most content words with the rest, in text order; a
    sentence that comes again (overlapping chunks repeat their edges) counts once, at its first place."""
    seen: set[str] = set()
    spans = []
    for s, e in sentences(text):
        words = text[s:e].split()
        if 6 <= len(words) <= 60 and " ".join(words).lower() not in seen:
            seen.add(" ".join(words).lower())
            spans.append((s, e))
    if not spans:
        return [text.strip()[:400]] if text.strip() else []
    bags = [set(content_words(text[s:e])) for s, e in spans]
    freq: Counter[str] = Counter(w for bag in bags for w in bag)
    scores = [sum(freq[w] - 1 for w in bag) / (len(bag) ** 0.5 or 1.0) for bag in bags]
    best = sorted(range(len(spans)), key=lambda i: (-scores[i], i))[:n]
    return [" ".join(text[spans[i][0] : spans[i][1]].split()) for i in sorted(best)]


def extractive_summary(chunk_texts: Sequence[str], n: int = SUMMARY_SENTENCES) -> str:
    """Map-reduce in the LLM summary's shape: central sentences per chunk, ``n`` per section of chunks
    (``section_ranges``: ``SECTION_CHUNKS`` chunks each, at most ``MAX_SECTIONS``), then an overview of
    ``n`` from the sections; one section gives its sentences alone, several the overview and then one
    ``Part i of n (chunks a–b): …`` line per section (``assemble``)."""
    per_chunk = [" ".join(central_sentences(t, 2)) for t in chunk_texts if t.strip()]
    ranges = section_ranges(len(per_chunk), SECTION_CHUNKS, MAX_SECTIONS)
    parts = [
        (section_heading(i, len(ranges), a, b), " ".join(central_sentences(" ".join(per_chunk[a:b]), n)))
        for i, (a, b) in enumerate(ranges)
    ]
    if len(parts) <= 1:
        return parts[0][1] if parts else ""
    said = {_said(p[s:e]) for _, p in parts for s, e in sentences(p)}
    rest = " ".join(
        " ".join(c[s:e].split()) for c in per_chunk for s, e in sentences(c) if _said(c[s:e]) not in said
    )  # the overview repeats no sentence of its sections (a summary never says one twice)
    overview = " ".join(central_sentences(rest, n)) if rest else ""
    return assemble(overview, parts) if overview else "\n".join(f"{h}: {p}" for h, p in parts)


def _said(sentence: str) -> str:
    return " ".join(sentence.split()).lower()


# --- map-reduce helpers (pure) ------------------------------------------------------------------------


def section_ranges(
    n_chunks: int, per_section: int = LLM_SECTION_CHUNKS, max_sections: int = MAX_SECTIONS
) -> tuple[tuple[int, int], ...]:
    """Consecutive ``[start, end)`` chunk ranges: ``per_section`` chunks each, or more so that there
    are at most ``max_sections``; sizes differ by at most one chunk."""
    if n_chunks <= 0:
        return ()
    count = min(max(1, max_sections), math.ceil(n_chunks / max(1, per_section)))
    base, extra = divmod(n_chunks, count)
    out, start = [], 0
    for i in range(count):
        end = start + base + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return tuple(out)


def section_heading(index: int, count: int, start: int, end: int, unit: str = "chunks") -> str:
    """The stable heading of section ``index`` (0-based) of ``count`` covering ``[start, end)``."""
    span = f"{unit} {start + 1}" if end - start == 1 else f"{unit} {start + 1}–{end}"
    return f"Part {index + 1} of {count} ({span})"


def fitted(parts: Sequence[str], limit: int = SECTION_CHARS) -> list[str]:
    """``parts`` cut so that together they hold at most ``limit`` characters: each gets an equal share
    of what the shorter ones leave, cut at a word boundary with "…"."""
    out = [" ".join(p.split()) for p in parts]
    if sum(len(p) for p in out) <= limit:
        return out
    budget, left = limit, len(out)
    share = {i: 0 for i in range(len(out))}
    for i in sorted(range(len(out)), key=lambda j: len(out[j])):
        share[i] = min(len(out[i]), budget // left)
        budget -= share[i]
        left -= 1
    return [p if len(p) <= share[i] else p[: share[i]].rsplit(" ", 1)[0] + "…" for i, p in enumerate(out)]


def chunk_digest(text: str, n: int = DIGEST_SENTENCES) -> str:
    """The map step: one chunk condensed to its ``n`` central sentences (no LLM)."""
    return " ".join(central_sentences(text, n))


def section_messages(book_title: str, chapter_title: str, heading: str, digests: Sequence[str]) -> list:
    """The chat messages asking for one section's summary."""
    text = "\n".join(fitted(digests))
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f'Book: "{book_title}". Chapter: "{chapter_title}", {heading.lower()}.\n'
            f"Key sentences, in order:\n{text}\n\n"
            f"Summarise what happens in these sentences in at most 4 sentences.",
        },
    ]


def reduce_messages(book_title: str, what: str, parts: Sequence[tuple[str, str]]) -> list:
    """The chat messages reducing summaries of parts (heading, summary) to one overview of ``what``."""
    headings = [h for h, _ in parts]
    body = "\n".join(f"{h}: {s}" for h, s in zip(headings, fitted([s for _, s in parts]), strict=True))
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f'Book: "{book_title}". Summaries of the parts of {what}, in order:\n{body}\n\n'
            f"Write one overview of {what} in at most 5 sentences.",
        },
    ]


_LABEL = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?\s*(?:summary|overview|synopsis)\s*(?:\*\*)?\s*[:.\-–]\s*", re.I)
_MARKUP = re.compile(r"^\s*(?:#+|[-*•]|\d+[.)])\s+", re.M)
_ENDS = (".", "!", "?", '."', '!"', '?"', ".”", ".’")


def clean_reply(text: str, max_words: int = SUMMARY_WORDS) -> str:
    """An LLM summary as plain prose: labels ("Summary:"), markdown headings, bullets and emphasis
    dropped, whitespace joined, at most ``max_words`` words, ending at the last full sentence when
    there is one; ``ValueError`` when nothing is left."""
    body = _MARKUP.sub("", _LABEL.sub("", text.strip())).replace("**", "")
    words = body.split()
    if not words:
        raise ValueError("the model's summary was empty")
    flat = " ".join(words[:max_words])
    if not flat.endswith(_ENDS):
        cut = max(flat.rfind(end + " ") for end in ".!?")
        flat = flat[: cut + 1] if cut > 0 else flat
    return flat


def assemble(overview: str, parts: Sequence[tuple[str, str]]) -> str:
    """The summary with stable headings: the overview, then ``heading: summary`` per part (one part:
    its summary alone)."""
    if len(parts) <= 1:
        return parts[0][1] if parts else overview
    return overview + "\n\n" + "\n".join(f"{h}: {s}" for h, s in parts)


def synopsis_header(descriptor: dict[str, Any]) -> str:
    """``Title by Author.`` (the line every synopsis starts with)."""
    return f"{descriptor.get('title', '')} by {descriptor.get('author', '')}."


# --- the LLM summariser -------------------------------------------------------------------------------


class LLMSummarizer:
    """Map-reduce summaries over an OpenAI-compatible ``client`` (``OpenAIChatClient`` or its budgeted
    view): at most ``MAX_SECTIONS + 1`` calls per chapter or synopsis.

    Args:
        client: the chat client (``chat(messages, max_tokens=...)``; its ``model`` names the summariser).
        budget: the question's ``ToolBudget`` when ``client`` spends from it (callers then check
            ``chapter_calls`` against ``budget.left`` first), else None.
        deadline_seconds: bound of one summary's calls together (a timeout is an ``LLMError``).
    """

    def __init__(self, client: Any, budget: Any = None, deadline_seconds: float = DEADLINE_SECONDS) -> None:
        self.client = client
        self.budget = budget
        self.deadline_seconds = float(deadline_seconds)

    @property
    def id(self) -> str:
        """The summariser's key in the summary store: the model and the prompt version."""
        return f"llm:{getattr(self.client, 'model', '?')}:v{PROMPT_VERSION}"

    @staticmethod
    def chapter_calls(n_chunks: int) -> int:
        """LLM calls a chapter of ``n_chunks`` chunks costs (one per section, one reduce when several)."""
        n = len(section_ranges(n_chunks))
        return n + (1 if n > 1 else 0)

    @staticmethod
    def synopsis_calls(chapters: Sequence[tuple[str, str]]) -> int:
        """LLM calls a synopsis over these chapter summaries ``(title, summary)`` costs."""
        n = len(_chapter_groups(_chapter_lines(chapters)))
        return n + (1 if n > 1 else 0)

    def _ask(self, messages: list, deadline: Deadline) -> str:
        bound = min(SUMMARY_TOKENS, int(getattr(self.client, "max_tokens", SUMMARY_TOKENS)))
        reply = self.client.chat(messages, max_tokens=bound, deadline=deadline)
        try:
            return clean_reply(reply.content or "")
        except ValueError as exc:
            raise LLMError("summary", str(exc)) from None

    def chapter(self, book_title: str, chapter_title: str, chunk_texts: Sequence[str]) -> str:
        """The chapter's summary (``LLMError`` when a call fails: the caller falls back)."""
        ranges = section_ranges(len(chunk_texts))
        if not ranges:
            raise LLMError("summary", "the chapter has no text")
        deadline = Deadline.after(self.deadline_seconds)
        parts = []
        for i, (start, end) in enumerate(ranges):
            heading = section_heading(i, len(ranges), start, end)
            digests = [chunk_digest(t) for t in chunk_texts[start:end]]
            parts.append(
                (heading, self._ask(section_messages(book_title, chapter_title, heading, digests), deadline))
            )
        if len(parts) == 1:
            return parts[0][1]
        overview = self._ask(reduce_messages(book_title, f'the chapter "{chapter_title}"', parts), deadline)
        return assemble(overview, parts)

    def synopsis(self, descriptor: dict[str, Any], chapters: Sequence[tuple[str, str]]) -> str:
        """The book's synopsis from its chapter summaries ``(title, summary)`` in order."""
        if not chapters:
            raise LLMError("summary", "the book has no chapter summaries")
        title = str(descriptor.get("title", ""))
        deadline = Deadline.after(self.deadline_seconds)
        lines = _chapter_lines(chapters)
        groups = _chapter_groups(lines)
        parts = []
        for i, (start, end) in enumerate(groups):
            heading = section_heading(i, len(groups), start, end, unit="chapters")
            what = "the book" if len(groups) == 1 else f"chapters {start + 1}–{end} of the book"
            body = [(f"Chapter {start + j + 1}", line) for j, line in enumerate(lines[start:end])]
            parts.append((heading, self._ask(reduce_messages(title, what, body), deadline)))
        if len(parts) == 1:
            overview = parts[0][1]
        else:
            overview = self._ask(reduce_messages(title, "the book", parts), deadline)
        return synopsis_header(descriptor) + "\n" + assemble(overview, parts)


def _chapter_lines(chapters: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{title}: {summary}" for title, summary in chapters]


def _chapter_groups(lines: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """Chapter ranges for a synopsis: one group when all fit one prompt, else at most MAX_SECTIONS."""
    if not lines:
        return ()
    if sum(len(x) for x in lines) <= SECTION_CHARS:
        return ((0, len(lines)),)
    per = math.ceil(len(lines) / MAX_SECTIONS)
    return section_ranges(len(lines), per_section=max(1, per))
