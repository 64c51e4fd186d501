"""Evaluation DAG: question files → gold → retrieval ranks (+ answers) → per-question records → metrics.

Question formats
- FairytaleQA (``questions.csv`` with ``sections.csv`` beside it): the gold passage is the
  ``sections.csv`` text of ``(story, cor_section)`` (several sections → their union), located in the
  ingested book by aligning 5-word shingles (the dataset's copy of a story differs from the book in
  punctuation and OCR details, so exact search is not enough; an edition that moves or drops a
  paragraph inside the passage still gives the whole of it: ``nodes/core/gold.py``).
- JSONL lines ``{question, book_file, gold_quote, gold_chapter, answers}``: the gold is the quote
  (located by normalised containment) or, without a quote, the chapter (by title or id).
- Kiwix JSONL lines ``{question, answers, gold_zim, gold_path}``: the gold is an article; a question
  is a hit at k when the article is among the Kiwix pipeline's top k candidates or is cited in the
  answer. Kiwix and book lines may share one file.
- Library JSONL lines ``{question, expect: "answer"|"refuse", answers?, book_file?, gold_quote?}``:
  asked over the whole library, as a user would, the router deciding; ``book_file`` and
  ``gold_quote``, when given, locate a gold passage as for book lines.
  ``tests/qa/library_questions.jsonl`` holds the off-library ("refuse") and in-library ("answer")
  questions of the sample library. ``expect_with_zim`` and ``answers_with_zim`` replace them when the
  run searches the archives too (a question the sample ZIMs answer is not off-library there).

A retrieved chunk is a hit when it covers at least half of the gold span's characters (JSONL: when it
contains the gold quote, or lies in the gold chapter when there is no quote). The question's book is
given (``book_file`` matched to the ingested book by source file name); the story is not.
Retrieval metrics: ``n, located, hit@1, hit@5, hit@10, mrr@10, p50_ms, p95_ms`` (hit rates over
located questions; latency of the search).

Answer metrics (``eval_answers: true``; the question goes through the query DAG, scoped to its book,
the whole library, or — a Kiwix question — the library's books and the archives, as a user asks):
``answered``; ``answer_contained_rate`` (a normalised accepted answer — lower
case, no punctuation or articles — appears in the answer or in the text of a cited source, over the
questions that have accepted answers); ``grounded_rate`` (every citation resolves to real text: the
cited chunk exists with the cited chapter and offsets, or the cited article opens and has text; over
answers with citations); ``unsupported_rate`` ("could not find support" answers); ``gold_cited_rate``
(a cited chunk is a hit for the gold, or the gold article is cited; over located questions);
``tool_calls_mean``; ``answer_p50_ms``/``answer_p95_ms``.

Strict answer metrics (beside the lenient ones; the answer *text* is the answer with its citation
markers such as ``[1]`` removed; the refusal is the text opening with ``NOT_FOUND`` or ``NO_RESULTS``):
``answer_in_text`` (a normalised accepted answer inside the answer text only, over questions with
accepted answers; a refusal never contains it); ``answer_words_p50`` (median words of the answer text,
over non-refusals); ``first_citation_gold`` (books: the first citation is in the gold chapter and its
span and the gold span overlap by at least half of the shorter one, so a sentence citation inside the
gold passage and a chunk holding half of it both count; a gold chapter without a quote: that chapter;
Kiwix: the first citation is the gold article; over questions with a located gold);
``duplicate_rate`` (answers in which a sentence repeats, normalised, over non-refusals);
``fragment_rate`` (answer lines, headings and bullets aside, starting mid-sentence: a lower-case letter
or punctuation other than an opening quotation mark or bracket); ``short_line_rate`` (answer lines of
three words or fewer); ``refusal_rate`` (refusals among the ``expect: refuse`` questions) and
``answered_rate`` (non-refusals among the ``expect: answer`` questions), present only when the file
has such questions. ``gold_cited_rate`` is judged on the cited *chunks* (``cited_chunk``), so it keeps
its meaning when citations are sentence spans.

Where the reader reads: ``ask_hit@1`` / ``ask_hit@3`` (the chunk behind ask's first citation / one of
its first three covers the gold, as a search hit does; Kiwix: the gold article) beside search's hit@k,
and ``ask_vs_search@1`` (ask_hit@1 minus search's hit@1 over the same questions; below 0: ask answers
from elsewhere than search's top hit); over located questions that were answered.

Inputs (from ``dataflows.evaluation``): ``qa_file``; ``stores_by_file`` (source file name → BookStore);
``searcher(question, store) -> hits``; ``kiwix_searcher(question) -> ranked (zim, path)``;
``answerer(item, store | None) -> Answer`` (store None: a library or Kiwix question);
``evidence_text(citation) -> text | None``; ``cited_chunk(citation) -> Hit | None`` (the chunk a book
citation names).
Config keys: ``search_k`` (depth searched, at least 10), ``eval_answers`` (variant key: true runs the
answer checks, false skips them).
Limitations: containment is a strict test for FairytaleQA's free-form answers (written by annotators,
often paraphrased), so its absolute value is low; compare it across variants, not with other papers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from hamilton.function_modifiers import config

from folio.nodes.backends.qa_files import QAItem, read_fairytaleqa, read_jsonl, with_archives
from folio.nodes.core.gold import BookAligner, GoldSpan, locate, normalised
from folio.nodes.core.text import fold, sentences, words
from folio.nodes.core.types import NO_RESULTS, NOT_FOUND, Answer, Citation, FolioError, Hit


@dataclass(frozen=True)
class AnswerCheck:
    """What the query DAG answered for one question, and how it fared."""

    answer: str
    contained: bool | None  # None: the question has no accepted answers
    grounded: bool | None  # None: no citations
    unsupported: bool
    gold_cited: bool
    tool_calls: int
    latency_ms: float
    cited: tuple[str, ...] = ()  # "book_id/chunk_id" or "zim/path"
    in_text: bool | None = None  # an accepted answer in the answer text itself (None: no accepted answers)
    words: int = 0  # words of the answer text (citation markers stripped)
    first_gold: bool | None = None  # the first citation covers the gold (None: no gold located)
    refused: bool = False  # the answer is the refusal (or no source answered)
    duplicated: bool = False  # a sentence of the answer repeats
    lines: int = 0  # answer lines (blank lines and headings aside)
    fragment_lines: int = 0  # lines starting mid-sentence
    short_lines: int = 0  # lines of three words or fewer
    expect: str = ""  # library questions: "answer" or "refuse"
    ask_rank: int | None = None  # 1-based place of the first citation covering the gold (None: none)


@dataclass(frozen=True)
class EvalRecord:
    qid: str
    question: str
    located: bool
    rank: int | None  # 1-based rank of the first hit within the retrieved list
    latency_ms: float
    top: tuple[tuple[str, int, int], ...]  # (chunk_id, start, end) of the top results
    kind: str = "book"  # book | kiwix
    check: AnswerCheck | None = None  # None: answers not evaluated


def _is_hit(hit: Hit, gold: GoldSpan) -> bool:
    """A chunk is a hit when it covers at least half of the gold span (or holds the quote / chapter)."""
    if hit.book_id != gold.book_id or hit.chapter_id != gold.chapter_id:
        return False
    if gold.whole_chapter:
        return True
    if gold.quote:
        return gold.quote in normalised(hit.text)
    overlap = min(hit.end, gold.end) - max(hit.start, gold.start)
    return overlap * 2 >= (gold.end - gold.start)


def _percentile(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def _rate(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def _is_retrieved(record: EvalRecord, k: int) -> bool:
    """Retrieved within the top ``k``; a Kiwix question also counts when its gold article is cited."""
    if record.rank is not None and record.rank <= k:
        return True
    return record.kind == "kiwix" and record.check is not None and record.check.gold_cited


def _metrics(records: Sequence[EvalRecord]) -> dict[str, float | int | None]:
    located = [r for r in records if r.located]
    n_loc = len(located) or 1

    def hit_at(k: int) -> float:
        return round(sum(1 for r in located if _is_retrieved(r, k)) / n_loc, 4)

    mrr = sum(1.0 / r.rank for r in located if r.rank is not None and r.rank <= 10) / n_loc
    latencies = [r.latency_ms for r in located]
    out: dict[str, float | int | None] = {
        "n": len(records),
        "located": len(located),
        "hit@1": hit_at(1),
        "hit@5": hit_at(5),
        "hit@10": hit_at(10),
        "mrr@10": round(mrr, 4),
        "p50_ms": _percentile(latencies, 50),
        "p95_ms": _percentile(latencies, 95),
    }
    checks = [r.check for r in records if r.check is not None]
    if checks:
        answer_ms = [c.latency_ms for c in checks]
        out.update(
            {
                "answered": len(checks),
                "answer_contained_rate": _rate([c.contained for c in checks if c.contained is not None]),
                "grounded_rate": _rate([c.grounded for c in checks if c.grounded is not None]),
                "unsupported_rate": _rate([c.unsupported for c in checks]),
                "gold_cited_rate": _rate([r.check.gold_cited for r in located if r.check is not None]),
                "tool_calls_mean": round(sum(c.tool_calls for c in checks) / len(checks), 3),
                "answer_p50_ms": _percentile(answer_ms, 50),
                "answer_p95_ms": _percentile(answer_ms, 95),
            }
        )
        out.update(_strict_metrics(checks))
        out.update(_ask_hits(located))
    return out


def _ask_hits(located: Sequence[EvalRecord]) -> dict[str, float | None]:
    """``ask_hit@1``/``ask_hit@3`` (the first / first three citations of the answer cover the gold) and
    ``ask_vs_search@1`` (ask_hit@1 minus search's hit@1 over the same questions), over located questions
    that were answered."""
    asked = [r for r in located if r.check is not None]
    if not asked:
        return {}

    def ask_at(k: int) -> float:
        placed = [r.check.ask_rank for r in asked if r.check is not None]
        return round(sum(1 for rank in placed if rank is not None and rank <= k) / len(asked), 4)

    search_at_1 = sum(1 for r in asked if _is_retrieved(r, 1)) / len(asked)
    return {
        "ask_hit@1": ask_at(1),
        "ask_hit@3": ask_at(3),
        "ask_vs_search@1": round(ask_at(1) - search_at_1, 4),
    }


def _strict_metrics(checks: Sequence[AnswerCheck]) -> dict[str, float | int | None]:
    """The strict answer metrics of the module docstring (None where nothing was measured)."""
    answered = [c for c in checks if not c.refused]
    lines = sum(c.lines for c in answered)
    out: dict[str, float | int | None] = {
        "answer_in_text": _rate([c.in_text for c in checks if c.in_text is not None]),
        "answer_words_p50": _percentile([c.words for c in answered], 50) if answered else None,
        "first_citation_gold": _rate([c.first_gold for c in checks if c.first_gold is not None]),
        "duplicate_rate": _rate([c.duplicated for c in answered]),
        "fragment_rate": round(sum(c.fragment_lines for c in answered) / lines, 4) if lines else None,
        "short_line_rate": round(sum(c.short_lines for c in answered) / lines, 4) if lines else None,
    }
    refuse = [c.refused for c in checks if c.expect == "refuse"]
    answer = [not c.refused for c in checks if c.expect == "answer"]
    if refuse:
        out["refusal_rate"] = _rate(refuse)
    if answer:
        out["answered_rate"] = _rate(answer)
    return out


# --- answers -------------------------------------------------------------------------------------

_ARTICLES = frozenset({"a", "an", "the"})


def _answer_norm(text: str) -> str:
    """Lower case, punctuation gone, articles dropped, one space between words (SQuAD-style)."""
    return " ".join(w for w in words(fold(text).replace("'", " ")) if w not in _ARTICLES)


def _contains_answer(accepted: Sequence[str], texts: Sequence[str]) -> bool | None:
    """Whether a normalised accepted answer appears, on word boundaries, in one of ``texts``."""
    wanted = [a for a in (_answer_norm(x) for x in accepted) if a]
    if not wanted:
        return None
    haystacks = [f" {_answer_norm(t)} " for t in texts if t]
    return any(f" {a} " in h for a in wanted for h in haystacks)


_MARKER = re.compile(r"[ \t]*\[\d+\]")
_OPENERS = "\"'“‘«([{¿¡"  # a line may open with a quotation mark or a bracket
# "## Title", a bold title line, or a fused answer's source header "[KIWIX — Emu]"
_HEADING = re.compile(r"^\s*(#+\s|\*\*[^*]+\*\*\s*:?\s*$|\[[A-Z]+(?: — [^\]]*)?\]\s*$)")
_BULLET = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+)")


def _answer_text(answer: str) -> str:
    """The answer as a reader sees its words: citation markers like ``[1]`` removed."""
    return _MARKER.sub("", answer).strip()


def _is_refusal(answer: str) -> bool:
    """The refusal ("I could not find support…", or no source answered)."""
    return answer.strip().startswith((NOT_FOUND, NO_RESULTS))


def _answer_lines(text: str) -> list[str]:
    """The answer's reading lines: blank lines, headings and separators ("---", no word in them)
    dropped, list bullets stripped."""
    lines = []
    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line):
            continue
        lines.append(_BULLET.sub("", line).strip())
    return [line for line in lines if any(ch.isalnum() for ch in line)]


def _is_fragment(line: str) -> bool:
    """The line starts mid-sentence: a lower-case letter, or punctuation other than an opening quote or
    bracket."""
    first = line.lstrip()[:1]
    if not first:
        return False
    if first.isalpha():
        return first.islower()
    return not first.isdigit() and first not in _OPENERS


def _is_short(line: str) -> bool:
    """A line of three words or fewer (infobox or navbox residue)."""
    return len(words(line)) <= 3


def _has_duplicate(text: str) -> bool:
    """Whether a sentence of the answer repeats (compared normalised, across lines)."""
    seen: set[str] = set()
    for line in _answer_lines(text):
        for s, e in sentences(line):
            key = _answer_norm(line[s:e])
            if not key:
                continue
            if key in seen:
                return True
            seen.add(key)
    return False


def _overlaps(c_start: int, c_end: int, gold: GoldSpan) -> bool:
    """The spans overlap by at least half of the shorter one (a sentence inside the gold passage, or a
    chunk that holds half of it)."""
    overlap = min(c_end, gold.end) - max(c_start, gold.start)
    shorter = min(c_end - c_start, gold.end - gold.start)
    return overlap > 0 and overlap * 2 >= shorter


def _first_citation_gold(item: QAItem, gold: GoldSpan | None, citations: Sequence[Citation]) -> bool | None:
    """The first citation is the gold article (Kiwix) or covers the gold passage (books: same chapter,
    spans overlapping by half of the shorter one; a gold chapter without a quote: that chapter)."""
    if item.gold_zim:
        return bool(citations) and (citations[0].kind, citations[0].zim, citations[0].path) == (
            "kiwix",
            item.gold_zim,
            item.gold_path,
        )
    if gold is None:
        return None
    if not citations:
        return False
    c = citations[0]
    if c.kind != "book" or (c.book_id, c.chapter_id) != (gold.book_id, gold.chapter_id):
        return False
    return gold.whole_chapter or _overlaps(c.start, c.end, gold)


def _citation_key(c: Citation) -> str:
    return (
        f"{c.book_id}/{c.chunk_id}"
        if c.kind == "book"
        else f"{c.zim}/{c.path}"
        if c.kind == "kiwix"
        else c.url
    )


def _covers_gold(item: QAItem, gold: GoldSpan | None, c: Citation, chunk: Hit | None) -> bool:
    """The citation is the gold article (Kiwix), or its chunk is a hit for the gold span (books; judged on
    the cited chunk, so a sentence citation counts when its chunk holds the gold)."""
    if item.kind == "kiwix":
        return c.kind == "kiwix" and (c.zim, c.path) == (item.gold_zim, item.gold_path)
    return gold is not None and c.kind == "book" and chunk is not None and _is_hit(chunk, gold)


def _ask_rank(
    item: QAItem, gold: GoldSpan | None, chunks: Sequence[tuple[Citation, Hit | None]]
) -> int | None:
    """The 1-based place of the first citation that covers the gold (None: no citation does)."""
    return next((i for i, (c, chunk) in enumerate(chunks, 1) if _covers_gold(item, gold, c, chunk)), None)


def _check(
    item: QAItem,
    gold: GoldSpan | None,
    answer: Answer,
    latency_ms: float,
    evidence_text: Callable[[Citation], str | None],
    cited_chunk: Callable[[Citation], Hit | None],
) -> AnswerCheck:
    """Score one answer: containment (lenient: answer or cited text; strict: answer text), grounding,
    support, whether the gold is cited (any cited chunk; the first citation), and how the text reads."""
    resolved = [(c, evidence_text(c) or "") for c in answer.citations]
    grounded = all(text for _, text in resolved) if resolved else None
    text = _answer_text(answer.answer)
    refused = _is_refusal(text)
    lines = [] if refused else _answer_lines(text)
    ask_rank = _ask_rank(item, gold, [(c, cited_chunk(c)) for c in answer.citations])
    return AnswerCheck(
        answer=answer.answer,
        contained=_contains_answer(item.answers, [answer.answer, *(t for _, t in resolved)]),
        grounded=grounded,
        unsupported=refused or not answer.citations,
        gold_cited=ask_rank is not None,
        tool_calls=answer.tool_calls,
        latency_ms=round(latency_ms, 2),
        cited=tuple(_citation_key(c) for c in answer.citations),
        in_text=_contains_answer(item.answers, [] if refused else [text]),
        words=0 if refused else len(words(text)),
        first_gold=_first_citation_gold(item, gold, answer.citations),
        refused=refused,
        duplicated=not refused and _has_duplicate(text),
        lines=len(lines),
        fragment_lines=sum(_is_fragment(line) for line in lines),
        short_lines=sum(_is_short(line) for line in lines),
        expect=item.expect,
        ask_rank=ask_rank,
    )


# --- nodes ---------------------------------------------------------------------------------------


def qa_items(qa_file: str, with_zims: bool = False) -> tuple[QAItem, ...]:
    """The questions of a FairytaleQA CSV or a JSONL question file; ``with_zims``: library questions as
    asked beside the archives (``qa_files.with_archives``)."""
    path = Path(qa_file).expanduser()
    if not path.is_file():
        raise FolioError(str(path), "question file not found")
    items = read_jsonl(path) if path.suffix.lower() in (".jsonl", ".json") else read_fairytaleqa(path)
    if not items:
        raise FolioError(str(path), "no questions in the file")
    return tuple(with_archives(i) for i in items) if with_zims else items


def gold_spans(qa_items: tuple[QAItem, ...], stores_by_file: dict) -> tuple[GoldSpan | None, ...]:
    """Each question's gold span in its ingested book (None when the book or passage is not found)."""
    aligners: dict[str, BookAligner] = {}
    out: list[GoldSpan | None] = []
    for item in qa_items:
        store = stores_by_file.get(Path(item.book_file).name)
        if store is None:
            out.append(None)
            continue
        if item.passages and store.book_id not in aligners:
            aligners[store.book_id] = BookAligner(store)
        out.append(locate(item, store, aligners.get(store.book_id)))
    return tuple(out)


def retrieval_records(
    qa_items: tuple[QAItem, ...],
    gold_spans: tuple[GoldSpan | None, ...],
    stores_by_file: dict,
    searcher: Callable,
    kiwix_searcher: Callable,
) -> tuple[EvalRecord, ...]:
    """Search each located question (its book, or Kiwix) and record the first hit's rank and the latency."""
    records = []
    for item, gold in zip(qa_items, gold_spans, strict=True):
        if item.kind == "kiwix":
            t0 = time.perf_counter()
            keys = list(kiwix_searcher(item.question))
            latency = (time.perf_counter() - t0) * 1000
            rank = next(
                (i for i, key in enumerate(keys, 1) if tuple(key) == (item.gold_zim, item.gold_path)), None
            )
            top = tuple((f"{zim}/{path}", 0, 0) for zim, path in keys[:10])
            records.append(EvalRecord(item.qid, item.question, True, rank, round(latency, 2), top, "kiwix"))
            continue
        if gold is None:
            records.append(EvalRecord(item.qid, item.question, False, None, 0.0, (), item.kind))
            continue
        store = stores_by_file[Path(item.book_file).name]
        t0 = time.perf_counter()
        hits = list(searcher(item.question, store))
        latency = (time.perf_counter() - t0) * 1000
        rank = next((i for i, h in enumerate(hits, 1) if _is_hit(h, gold)), None)
        top = tuple((h.chunk_id, h.start, h.end) for h in hits[:10])
        records.append(EvalRecord(item.qid, item.question, True, rank, round(latency, 2), top, item.kind))
    return tuple(records)


@config.when(eval_answers=True)
def answer_checks__query_dag(
    qa_items: tuple[QAItem, ...],
    gold_spans: tuple[GoldSpan | None, ...],
    stores_by_file: dict,
    answerer: Callable,
    evidence_text: Callable,
    cited_chunk: Callable,
) -> tuple[AnswerCheck | None, ...]:
    """Each question answered by the query DAG (scoped to its book, the whole library, or Kiwix) and
    checked."""
    checks: list[AnswerCheck | None] = []
    for item, gold in zip(qa_items, gold_spans, strict=True):
        store = stores_by_file.get(Path(item.book_file).name) if item.kind == "book" else None
        if item.kind == "book" and store is None:
            checks.append(None)
            continue
        t0 = time.perf_counter()
        answer = answerer(item, store)
        elapsed = (time.perf_counter() - t0) * 1000
        checks.append(_check(item, gold, answer, elapsed, evidence_text, cited_chunk))
    return tuple(checks)


@config.when(eval_answers=False)
def answer_checks__skipped(qa_items: tuple[QAItem, ...]) -> tuple[AnswerCheck | None, ...]:
    """No answers evaluated (retrieval only)."""
    return (None,) * len(qa_items)


def eval_records(
    retrieval_records: tuple[EvalRecord, ...], answer_checks: tuple[AnswerCheck | None, ...]
) -> tuple[EvalRecord, ...]:
    """One record per question: its retrieval rank and, when evaluated, its answer check."""
    return tuple(replace(r, check=c) for r, c in zip(retrieval_records, answer_checks, strict=True))


def eval_metrics(eval_records: tuple[EvalRecord, ...]) -> dict[str, float | int | None]:
    """Aggregate retrieval (and answer) metrics over the records."""
    return _metrics(eval_records)
