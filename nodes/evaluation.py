"""Evaluation DAG: question files → gold → retrieval ranks (+ answers) → per-question records → metrics.

Question formats
- FairytaleQA (``questions.csv`` with ``sections.csv`` beside it): the gold passage is the
  ``sections.csv`` text of ``(story, cor_section)`` (several sections → their union), located in the
  ingested book by aligning 5-word shingles (the dataset's copy of a story differs from the book in
  punctuation and OCR details, so exact search is not enough).
- JSONL lines ``{question, book_file, gold_quote, gold_chapter, answers}``: the gold is the quote
  (located by normalised containment) or, without a quote, the chapter (by title or id).
- Kiwix JSONL lines ``{question, answers, gold_zim, gold_path}``: the gold is an article; a question
  is a hit at k when the article is among the Kiwix pipeline's top k candidates or is cited in the
  answer. Kiwix and book lines may share one file.

A retrieved chunk is a hit when it covers at least half of the gold span's characters (JSONL: when it
contains the gold quote, or lies in the gold chapter when there is no quote). The question's book is
given (``book_file`` matched to the ingested book by source file name); the story is not.
Retrieval metrics: ``n, located, hit@1, hit@5, hit@10, mrr@10, p50_ms, p95_ms`` (hit rates over
located questions; latency of the search).

Answer metrics (``eval_answers: true``; the question goes through the query DAG, scoped to its book,
or to Kiwix alone): ``answered``; ``answer_contained_rate`` (a normalised accepted answer — lower
case, no punctuation or articles — appears in the answer or in the text of a cited source, over the
questions that have accepted answers); ``grounded_rate`` (every citation resolves to real text: the
cited chunk exists with the cited chapter and offsets, or the cited article opens and has text; over
answers with citations); ``unsupported_rate`` ("could not find support" answers); ``gold_cited_rate``
(a cited chunk is a hit for the gold, or the gold article is cited; over located questions);
``tool_calls_mean``; ``answer_p50_ms``/``answer_p95_ms``.

Inputs (from ``dataflows.evaluation``): ``qa_file``; ``stores_by_file`` (source file name → BookStore);
``searcher(question, store) -> hits``; ``kiwix_searcher(question) -> ranked (zim, path)``;
``answerer(item, store | None) -> Answer``; ``evidence_text(citation) -> text | None``.
Config keys: ``search_k`` (depth searched, at least 10), ``eval_answers`` (variant key: true runs the
answer checks, false skips them).
Limitations: containment is a strict test for FairytaleQA's free-form answers (written by annotators,
often paraphrased), so its absolute value is low; compare it across variants, not with other papers.
"""

from __future__ import annotations

import csv
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from hamilton.function_modifiers import config

from folio.nodes.backends.book_store import BookStore
from folio.nodes.text import word_spans, words
from folio.nodes.types import NOT_FOUND, Answer, Citation, FolioError, Hit

SHINGLE = 5


@dataclass(frozen=True)
class QAItem:
    qid: str
    question: str
    book_file: str
    passages: tuple[str, ...] = ()  # FairytaleQA gold sections
    gold_quote: str = ""
    gold_chapter: str = ""
    answers: tuple[str, ...] = ()
    gold_zim: str = ""  # Kiwix questions: the gold article
    gold_path: str = ""

    @property
    def kind(self) -> str:
        return "kiwix" if self.gold_zim else "book"


@dataclass(frozen=True)
class GoldSpan:
    book_id: str
    chapter_id: str
    start: int
    end: int
    quote: str = ""  # JSONL quotes: a chunk must contain it
    whole_chapter: bool = False


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


# --- reading question files ----------------------------------------------------------------------


def _read_fairytaleqa(path: Path) -> tuple[QAItem, ...]:
    sections_path = path.parent / "sections.csv"
    if not sections_path.exists():
        raise FolioError(str(path), "FairytaleQA questions need sections.csv beside them")
    with sections_path.open(encoding="utf-8", newline="") as f:
        sections = {(r["story"], r["section"].strip()): r["text"] for r in csv.DictReader(f)}
    items = []
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            refs = [s.strip() for s in row["cor_section"].split(",") if s.strip()]
            passages = tuple(sections[(row["story"], s)] for s in refs if (row["story"], s) in sections)
            answers = tuple(row.get(f"answer{i}", "") for i in range(1, 7) if row.get(f"answer{i}"))
            items.append(
                QAItem(
                    qid=f"{row['story']}/{row['question_id']}",
                    question=row["question"],
                    book_file=row["book_file"],
                    passages=passages,
                    answers=answers,
                )
            )
    return tuple(items)


def _jsonl_item(row: dict, n: int) -> QAItem:
    answers = tuple(str(a) for a in row.get("answers") or ())
    qid = str(row.get("id", n))
    if row.get("gold_zim"):
        return QAItem(
            qid=qid,
            question=row["question"],
            book_file="",
            answers=answers,
            gold_zim=str(row["gold_zim"]),
            gold_path=str(row["gold_path"]),
        )
    return QAItem(
        qid=qid,
        question=row["question"],
        book_file=row["book_file"],
        gold_quote=row.get("gold_quote") or "",
        gold_chapter=row.get("gold_chapter") or "",
        answers=answers,
    )


def _read_jsonl(path: Path) -> tuple[QAItem, ...]:
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            items.append(_jsonl_item(row, n))
        except (ValueError, KeyError) as exc:
            raise FolioError(f"{path}:{n}", f"not a question line ({type(exc).__name__}: {exc})") from None
    return tuple(items)


# --- locating gold -------------------------------------------------------------------------------


def _word_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Folded words of ``text`` with their character spans."""
    found = word_spans(text)
    return [w for w, _, _ in found], [(s, e) for _, s, e in found]


class _BookAligner:
    """Shingle index of one book's chapters, for locating passages that differ in punctuation."""

    def __init__(self, store: BookStore) -> None:
        self.store = store
        self.chapters: list[tuple[str, list[tuple[int, int]]]] = []
        self.index: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for c_idx, chapter in enumerate(store.descriptor["chapters"]):
            toks, spans = _word_spans(store.chapter_text(chapter["chapter_id"]))
            self.chapters.append((chapter["chapter_id"], spans))
            for i in range(len(toks) - SHINGLE + 1):
                self.index.setdefault(tuple(toks[i : i + SHINGLE]), []).append((c_idx, i))

    def locate(self, passage: str) -> tuple[str, int, int] | None:
        toks, _ = _word_spans(passage)
        votes: Counter[tuple[int, int]] = Counter()
        matches: list[tuple[int, int, int]] = []  # (chapter, book word index, passage word index)
        for i in range(len(toks) - SHINGLE + 1):
            for c_idx, pos in self.index.get(tuple(toks[i : i + SHINGLE]), ()):
                votes[(c_idx, (pos - i) // 8)] += 1
                matches.append((c_idx, pos, i))
        if not votes:
            return None
        (c_idx, bucket), count = votes.most_common(1)[0]
        if count < max(2, 0.2 * max(1, len(toks) - SHINGLE + 1)):
            return None
        chosen = [(pos, i) for c, pos, i in matches if c == c_idx and abs((pos - i) // 8 - bucket) <= 1]
        first = min(pos for pos, _ in chosen)
        last = max(pos for pos, _ in chosen) + SHINGLE - 1
        chapter_id, spans = self.chapters[c_idx]
        return chapter_id, spans[first][0], spans[last][1]


def _norm(text: str) -> str:
    return " ".join(words(text))


def _locate(item: QAItem, store: BookStore, aligner: _BookAligner | None) -> GoldSpan | None:
    if item.passages:
        assert aligner is not None
        located = [aligner.locate(p) for p in item.passages]
        found = [loc for loc in located if loc is not None]
        if not found:
            return None
        chapter_id = Counter(loc[0] for loc in found).most_common(1)[0][0]
        same = [loc for loc in found if loc[0] == chapter_id]
        return GoldSpan(store.book_id, chapter_id, min(s for _, s, _ in same), max(e for _, _, e in same))
    if item.gold_quote:
        quote = _norm(item.gold_quote)
        for chapter in store.descriptor["chapters"]:
            if quote in _norm(store.chapter_text(chapter["chapter_id"])):
                return GoldSpan(store.book_id, chapter["chapter_id"], 0, chapter["length"], quote=quote)
        return None
    if item.gold_chapter:
        want = item.gold_chapter.strip().lower()
        for chapter in store.descriptor["chapters"]:
            if want in (chapter["chapter_id"].lower(), chapter["title"].strip().lower()):
                return GoldSpan(
                    store.book_id, chapter["chapter_id"], 0, chapter["length"], whole_chapter=True
                )
    return None


def _is_hit(hit: Hit, gold: GoldSpan) -> bool:
    """A chunk is a hit when it covers at least half of the gold span (or holds the quote / chapter)."""
    if hit.book_id != gold.book_id or hit.chapter_id != gold.chapter_id:
        return False
    if gold.whole_chapter:
        return True
    if gold.quote:
        return gold.quote in _norm(hit.text)
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
    return out


# --- answers -------------------------------------------------------------------------------------

_ARTICLES = frozenset({"a", "an", "the"})


def _answer_norm(text: str) -> str:
    """Lower case, punctuation gone, articles dropped, one space between words (SQuAD-style)."""
    return " ".join(w for w in words(text.replace("'", " ")) if w not in _ARTICLES)


def _contains_answer(accepted: Sequence[str], texts: Sequence[str]) -> bool | None:
    """Whether a normalised accepted answer appears, on word boundaries, in one of ``texts``."""
    wanted = [a for a in (_answer_norm(x) for x in accepted) if a]
    if not wanted:
        return None
    haystacks = [f" {_answer_norm(t)} " for t in texts if t]
    return any(f" {a} " in h for a in wanted for h in haystacks)


def _citation_key(c: Citation) -> str:
    return (
        f"{c.book_id}/{c.chunk_id}"
        if c.kind == "book"
        else f"{c.zim}/{c.path}"
        if c.kind == "kiwix"
        else c.url
    )


def _cites_gold(item: QAItem, gold: GoldSpan | None, resolved: Sequence[tuple[Citation, str]]) -> bool:
    """The gold article is cited (Kiwix), or a cited chunk is a hit for the gold span (books)."""
    if item.kind == "kiwix":
        return any(
            c.kind == "kiwix" and (c.zim, c.path) == (item.gold_zim, item.gold_path) for c, _ in resolved
        )
    return gold is not None and any(
        c.kind == "book"
        and _is_hit(Hit(c.book_id, c.chapter_id, "", c.chunk_id, c.start, c.end, 0.0, text), gold)
        for c, text in resolved
    )


def _check(
    item: QAItem,
    gold: GoldSpan | None,
    answer: Answer,
    latency_ms: float,
    evidence_text: Callable[[Citation], str | None],
) -> AnswerCheck:
    """Score one answer: containment, grounding, support, whether the gold is cited."""
    resolved = [(c, evidence_text(c) or "") for c in answer.citations]
    grounded = all(text for _, text in resolved) if resolved else None
    return AnswerCheck(
        answer=answer.answer,
        contained=_contains_answer(item.answers, [answer.answer, *(t for _, t in resolved)]),
        grounded=grounded,
        unsupported=answer.answer.strip().startswith(NOT_FOUND) or not answer.citations,
        gold_cited=_cites_gold(item, gold, resolved),
        tool_calls=answer.tool_calls,
        latency_ms=round(latency_ms, 2),
        cited=tuple(_citation_key(c) for c in answer.citations),
    )


# --- nodes ---------------------------------------------------------------------------------------


def qa_items(qa_file: str) -> tuple[QAItem, ...]:
    """The questions of a FairytaleQA CSV or a JSONL question file."""
    path = Path(qa_file).expanduser()
    if not path.is_file():
        raise FolioError(str(path), "question file not found")
    items = _read_jsonl(path) if path.suffix.lower() in (".jsonl", ".json") else _read_fairytaleqa(path)
    if not items:
        raise FolioError(str(path), "no questions in the file")
    return items


def gold_spans(qa_items: tuple[QAItem, ...], stores_by_file: dict) -> tuple[GoldSpan | None, ...]:
    """Each question's gold span in its ingested book (None when the book or passage is not found)."""
    aligners: dict[str, _BookAligner] = {}
    out: list[GoldSpan | None] = []
    for item in qa_items:
        store = stores_by_file.get(Path(item.book_file).name)
        if store is None:
            out.append(None)
            continue
        if item.passages and store.book_id not in aligners:
            aligners[store.book_id] = _BookAligner(store)
        out.append(_locate(item, store, aligners.get(store.book_id)))
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
            records.append(EvalRecord(item.qid, item.question, False, None, 0.0, ()))
            continue
        store = stores_by_file[Path(item.book_file).name]
        t0 = time.perf_counter()
        hits = list(searcher(item.question, store))
        latency = (time.perf_counter() - t0) * 1000
        rank = next((i for i, h in enumerate(hits, 1) if _is_hit(h, gold)), None)
        top = tuple((h.chunk_id, h.start, h.end) for h in hits[:10])
        records.append(EvalRecord(item.qid, item.question, True, rank, round(latency, 2), top))
    return tuple(records)


@config.when(eval_answers=True)
def answer_checks__query_dag(
    qa_items: tuple[QAItem, ...],
    gold_spans: tuple[GoldSpan | None, ...],
    stores_by_file: dict,
    answerer: Callable,
    evidence_text: Callable,
) -> tuple[AnswerCheck | None, ...]:
    """Each question answered by the query DAG (scoped to its book, or Kiwix) and checked."""
    checks: list[AnswerCheck | None] = []
    for item, gold in zip(qa_items, gold_spans, strict=True):
        store = stores_by_file.get(Path(item.book_file).name) if item.kind == "book" else None
        if item.kind == "book" and store is None:
            checks.append(None)
            continue
        t0 = time.perf_counter()
        answer = answerer(item, store)
        checks.append(_check(item, gold, answer, (time.perf_counter() - t0) * 1000, evidence_text))
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
