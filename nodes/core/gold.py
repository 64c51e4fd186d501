"""Gold spans: where a question's gold passage, quote or chapter lies in an ingested book.

The evaluation (``nodes/eval/metrics.py``) judges search hits and citations against these spans.

- FairytaleQA passages (``QAItem.passages``): ``BookAligner`` votes with shared ``SHINGLE``-word runs for
  the chapter and the offset where the passage lies, then widens the best-voted stretch over the
  passage's other matches close by (``_stretch``): an edition that moves, adds or drops a paragraph
  inside the passage keeps the whole of it.
- JSONL quotes (``gold_quote``): the quote's first occurrence, normalised; a chunk must contain it.
- JSONL chapters (``gold_chapter``, an id or a title): the whole chapter.

Config keys: none. Limitations: a passage written from another edition is located by its shared word
runs; a passage with fewer than a fifth of its runs in the book is not located.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from folio.nodes.backends.book_store import BookStore
from folio.nodes.backends.qa_files import QAItem
from folio.nodes.core.text import word_spans, words

SHINGLE = 5
GAP_WORDS = 80  # a passage's matches this close to its best-voted stretch belong to it (``_stretch``)


@dataclass(frozen=True)
class GoldSpan:
    book_id: str
    chapter_id: str
    start: int
    end: int
    quote: str = ""  # JSONL quotes: a chunk must contain it
    whole_chapter: bool = False


def _word_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Folded words of ``text`` with their character spans."""
    found = word_spans(text)
    return [w for w, _, _ in found], [(s, e) for _, s, e in found]


class BookAligner:
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
        here = [(pos, i) for c, pos, i in matches if c == c_idx]
        first, last = _stretch(here, [(pos, i) for pos, i in here if abs((pos - i) // 8 - bucket) <= 1])
        chapter_id, spans = self.chapters[c_idx]
        return chapter_id, spans[first][0], spans[last + SHINGLE - 1][1]


def _stretch(matches: Sequence[tuple[int, int]], core: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The book word span of a passage: its best-voted ``core`` matches ``(book word, passage word)``,
    widened over the chapter's other ``matches`` of the passage words before or after the core's, while
    each lies within ``GAP_WORDS`` of the span. An edition that moves, adds or drops a paragraph inside
    the passage (Potter's "Ginger and Pickles" puts two paragraphs between the passage's first sentences
    and the rest, "The Pie and the Patty-Pan" drops two sentences) shifts the rest of the passage off the
    best-voted offset, and the gold span would stop where the shift begins."""
    first, last = min(pos for pos, _ in core), max(pos for pos, _ in core)
    head, tail = min(i for _, i in core), max(i for _, i in core)
    for pos, _ in sorted(((p, i) for p, i in matches if p < first and i < head), reverse=True):
        if pos < first - GAP_WORDS:
            break
        first = pos
    for pos, _ in sorted((p, i) for p, i in matches if p > last and i > tail):
        if pos > last + GAP_WORDS:
            break
        last = pos
    return first, last


def normalised(text: str) -> str:
    return " ".join(words(text))


def _quote_span(quote: str, text: str) -> tuple[int, int] | None:
    """The character span of a normalised quote's first occurrence in ``text`` (None: not there)."""
    toks, spans = _word_spans(text)
    joined = " ".join(toks)
    pos = joined.find(quote) if quote else -1
    if pos < 0:
        return None
    first = joined[:pos].count(" ")
    last = first + quote.count(" ")
    return spans[first][0], spans[last][1]


def locate(item: QAItem, store: BookStore, aligner: BookAligner | None) -> GoldSpan | None:
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
        quote = normalised(item.gold_quote)
        for chapter in store.descriptor["chapters"]:
            span = _quote_span(quote, store.chapter_text(chapter["chapter_id"]))
            if span is not None:
                return GoldSpan(store.book_id, chapter["chapter_id"], *span, quote=quote)
        return None
    if item.gold_chapter:
        want = item.gold_chapter.strip().lower()
        for chapter in store.descriptor["chapters"]:
            if want in (chapter["chapter_id"].lower(), chapter["title"].strip().lower()):
                return GoldSpan(
                    store.book_id, chapter["chapter_id"], 0, chapter["length"], whole_chapter=True
                )
    return None
