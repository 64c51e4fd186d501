"""Reader: turn evidence (book chunks, article paragraphs) into a short passage a person can read.

The book answer (``nodes/query/answering.py``) and the Kiwix answer (``nodes/kiwix/fusion.py``) call it.

- Sentence scores (``relevance``, ``asked``, ``needs_previous``: the question's words, its kind and the
  type of answer it asks for) are in ``nodes/core/sentence_scoring.py``; this module assembles passages.
- ``passage(texts, scores, max_words)``: the indices (ascending, i.e. in reading order) of the texts —
  consecutive sentences of one source — that make the best passage: the best-scoring one, the
  predecessors it needs to read on its own (``needs_previous``: it opens with a pronoun, "He", "She",
  "This", "Their", or in lower case, or closes a quotation it did not open; a connective, "But",
  "Then", "So", reads on its own), then neighbours, the following one first (``FORWARD_BIAS``: the
  answer often follows the sentence that repeats the question), while they fit and score at least
  ``NEIGHBOUR_SHARE`` of the best; at most ``max_words`` words in all (the best one alone may exceed it
  when it is longer). The Kiwix answer uses it on an article's sentences.
- ``read_book(question, hits, chapter_text, encoder, max_words, max_passages)``: the ranked, disjoint
  ``Passage`` s of a book clause: sentences of the top ``MAX_CHUNKS`` evidence chunks, split over the
  chapter text around them (a chunk's cut-off first sentence is read whole; overlapping chunks give
  each sentence once, keyed by its chapter offsets). Units of one or two consecutive sentences
  (``UNIT_SENTENCES``) are scored as one: the question's stems found in any of their sentences, each
  sentence read under its chapter title (``TITLE_CONTEXT``: "in Rumpelstiltskin" is found in that
  story's sentences, which never name it; ``sentence_scoring.found_terms``'s contexts; a sentence opening
  with "he" or "she" counts the one name of the sentence before it that agrees, ``PRONOUN_NAMES`` and
  ``nodes/core/pronouns.py``, except for a "why" question, whose cause is often told the sentence
  before: "All the next day he sat on the Prince's shoulder, and told him stories" answers alone what
  the Swallow told the Happy Prince) (two
  sentences together cover a question that spreads over them, and the answer often follows the
  sentence that repeats the question; a unit holding the question's names and none of its other words
  counts ``sentence_scoring.FOCUS_SHARE`` of them; a pair whose first sentence holds no word of the
  question that the second lacks is no unit, so the passage opens at the sentence that answers, not the
  one before it: "So the King went away ..." before "... the nurse ... saw the door open, and the true
  Queen come in"), minus ``UNIT_PENALTY`` for the second sentence, plus
  the kind, minus ``RANK_PRIOR`` per retrieval rank of the chunk, a lone sentence over ``LONG_SENTENCE`` words
  (Moby-Dick's 140-word sentences) scaled down by its length; asked for an event ("What happened to Mr.
  Korbes when he came home?", "What did old Mrs. Rabbit do with the onions?": ``answer_types.asks_event``),
  plus ``EVENT_LENGTH_WEIGHT`` of its words up to ``EVENT_LENGTH_WORDS`` (a line repeating the question's
  names, "But when they came to Mr. Korbes's house he was not at home.", tells less of what happened than
  "Then Mr. Korbes came home, and went to the hearth ..., but the cat threw ashes in his eyes."); the
  ``PREFILTER`` best units gain their meaning (one encode of the units; the question's vector is the
  search's, remembered: ``ranking.search_text``). A passage is the best unit not yet taken,
  the predecessors a pronoun needs from its own paragraph (``CROSS_PARAGRAPH``: a paragraph before is
  often another section of the story, "... Mr. Samuel Whiskers and his wife on the run" before "They
  were just turning in at the gate to the barn of Farmer Potatoes."), then the sentences that follow
  while they fit ``max_words``; a
  passage still under ``SHORT_PASSAGE`` words takes the next sentence even past ``max_words`` (one at
  most twice that long), as does a passage of one sentence of speech under ``SPOKEN_PASSAGE`` words
  (``speaks``: the reply or what the words led to follows: "... so give me my wages." / "and he gave him
  a lump of gold as big as his head"). The encodes go through ``backends.encoder.remembered_encode``: a
  warm process encodes a sentence unit once. ``answer_passages`` picks what an
  extractive answer shows. A question asking what a name is and nothing else ("Who is Irene Adler?",
  "What are the Morlocks?": ``answer_types.asks_what_name_is``) reads first the chunk where the book first
  names it (``first_mentioned``, the caller's lookup: "Then I tried talk, and found that her name was
  Weena"), then the best hit's chapter's evidence in reading order (``_in_reading_order``): every chunk
  holds the name, and a book says who or what it is where it introduces it ("the well-known adventuress,
  Irene Adler"), not where the story later names it;
  a sentence introducing the name (``answer_types.introduces``: "the Morlocks—that, by the bye, was the
  name by which these creatures were called", "said Filby, an argumentative person with red hair") gains
  ``INTRODUCING_WEIGHT``, enough to outweigh three retrieval ranks of ``RANK_PRIOR``.

Measured on FairytaleQA (365 questions, default config, no LLM, the evidence of the ask DAG cached and
re-read, /tmp/reader2/tune.py; halves = even / odd rows): the accepted answer inside the answer text
0.378 (0.350 / 0.407; the sentence reader before: 0.35, the lead-of-chunks answer: 0.279), 51 words
median (was 54), first citation's sentence covering the gold section (half of the shorter span)
0.614 (0.607 / 0.621; was 0.542), no repeated sentence, 1.6% of lines open mid-sentence. Tried and
not kept: the stored window vectors' cosine (no gain), context weights of the neighbours' words,
units of three sentences, filling backwards, a learned linear or boosted scorer over these features
(no better than 0.63 gold on held-out rows): the sentence that holds the answer is often found only
by words the question does not use. Tried after that (/tmp/reader3, encoder on; not kept, both halves
must gain): filling with the preceding sentence when the following one does not fit (the rest of the
60 words) or scores 0.15 / 0.3 less than it: in the text 0.381 (0.350 / 0.412) but 54 words and the
first citation 0.556-0.581 (it now starts earlier than the sentence that answers); a pronoun sentence
counting the question's names its predecessor holds: 0.378 (0.344 / 0.412), gold 0.614 (0.601 / 0.626);
that with twice the kind weight: no better; a larger retrieval-rank prior (0.2: 0.364, gold 0.605; 0.3:
0.359, 0.592); "why" cues with ", for he ..." and a triple kind weight for "why" questions (0.375); 8
units encoded instead of 4 (0.375 / 0.367 with twice the meaning weight; 230 ms a question instead of
140). Of the questions whose first citation misses the gold section, 58 in 63 where the top chunk holds
it cite another sentence of that chunk: the sentence choice inside the chunk is what is missing.

Irregular forms (2026-11-25, /tmp/reader-tune, evidence captured once, halves = alternate stories): the
question's words and the sentences' are matched through their base form ("sent" / "send", "mice" /
"mouse"): in the text 0.367 -> 0.370, first citation 0.603 -> 0.608 (dev 0.378 / 0.627 -> 0.383 / 0.637,
held-out 0.355 / 0.576 unchanged). Tried and not kept: the top 5 passages re-scored by their whole
text's meaning (first citation 0.625 but in the text 0.362, and twice the reader's CPU time), that with
a region score (question words within 100 words: 0.633 / 0.362), pairs of consecutive question words
(0.373 / 0.608: dev up, held-out down), filling backwards (first citation 0.578).

Config keys: none here (callers pass ``answer_max_words``).
Limitations: English cues; the kind cues are word lists, not a parser; no pronoun resolution beyond
taking the predecessor; units outside the best ``PREFILTER`` by words are never encoded, so a
sentence that answers in other words than the question's is found only as the second sentence of a
unit; FairytaleQA's targets (0.40 in the text, 0.70 first citation in the gold section) are not met.
``_chunk_of`` matches a sentence to the evidence chunks by offsets alone, which are per chapter: a sentence
can take the rank of another chapter's chunk at the same offsets (its citation is re-made from its own
chapter's chunks by ``answering._in_chunks``; only ``RANK_PRIOR`` reads it). Restricting it to the
sentence's chapter lost answers on the held-out halves (docs/evaluation-questions.md, session 42).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from folio.nodes.backends.answer_types import (
    answer_type,
    asked_name,
    asks_event,
    asks_what_name_is,
    introduces,
)
from folio.nodes.backends.encoder import remembered_encode
from folio.nodes.core import sentence_scoring as scoring
from folio.nodes.core.pronouns import credited
from folio.nodes.core.ranking import search_text
from folio.nodes.core.sentence_scoring import asked, found_terms, needs_previous, word_count
from folio.nodes.core.text import named_phrases, sentences, words
from folio.nodes.core.types import Hit

# --- passage weights (the sentence weights are in ``sentence_scoring``) ------------------------------
RANK_PRIOR = 0.1  # (book passages) subtracted per retrieval rank of the chunk a unit comes from
UNIT_SENTENCES = 2  # (book passages) a unit scored as one: one sentence or two consecutive ones
UNIT_PENALTY = 0.1  # (book passages) subtracted for a unit's second sentence
NEIGHBOUR_SHARE = 0.0  # a neighbour joins while it fits and scores at least this share of the best
FORWARD_BIAS = 1.0  # a following neighbour counts this share of the best more (the answer often follows)
SECOND_SHARE = 0.9  # a second passage (elsewhere) when its best sentence scores this share of the first
PRONOUN_NAMES = True  # a pronoun-led sentence counts the name its predecessor holds (``pronouns``)
PRONOUN_SKIPS = frozenset(["why"])  # ... but not for these kinds: a cause is often told the sentence before
PREFILTER = 4  # candidate sentences scored by meaning (the rest by words only)
MAX_CHUNKS = 5  # evidence chunks read
LONG_SENTENCE = 60  # (book passages) a longer sentence's score is scaled by LONG_SENTENCE / its words
TITLE_CONTEXT = True  # a sentence is read under its chapter's title (the question's words the title holds)
MARGIN = 600  # characters of chapter text read around the chunks (whole first / previous sentences)
SHORT_PASSAGE = 35  # (book passages) a passage of fewer words takes its next sentence past the budget
EVENT_LENGTH_WEIGHT = 0.1  # (book passages) an event asked for: a unit gains this share of its words ...
EVENT_LENGTH_WORDS = 20  # ... up to this many (``answer_types.asks_event``)
CROSS_PARAGRAPH = False  # (book passages) a predecessor a pronoun needs may come from the paragraph before
SPEECH_MARKS = '“‘"'  # opening quotation marks (``speaks``)
SPOKEN_PASSAGE = 45  # (book passages) one sentence of speech under this many words reads on past the budget
INTRODUCING_WEIGHT = 0.3  # (book passages) asked what a name is: a sentence introducing it gains this


def passage(texts: Sequence[str], scores: Sequence[float], max_words: int = 60) -> tuple[int, ...]:
    """Indices, ascending, of the passage around the best-scoring text (see the module docstring)."""
    if not texts:
        return ()
    best = max(range(len(texts)), key=lambda i: (scores[i], -i))
    lo = hi = best
    used = word_count(texts[best])
    # the predecessors the passage needs to read on its own (two at most)
    for _ in range(2):
        if lo == 0 or not needs_previous(texts[lo]) or used + word_count(texts[lo - 1]) > max_words:
            break
        lo -= 1
        used += word_count(texts[lo])
    # then the better neighbour, while it scores close to the best and fits
    while True:
        options = [i for i in (lo - 1, hi + 1) if 0 <= i < len(texts)]
        options = [i for i in options if used + word_count(texts[i]) <= max_words]
        options = [i for i in options if scores[i] >= NEIGHBOUR_SHARE * scores[best]]
        if not options:
            break
        pick = max(options, key=lambda i: (scores[i] + (FORWARD_BIAS * scores[best] if i > hi else 0.0), i))
        if pick < lo:
            if (
                needs_previous(texts[pick])
                and pick > 0
                and used + word_count(texts[pick]) + word_count(texts[pick - 1]) <= max_words
            ):
                lo = pick - 1
                used += word_count(texts[pick - 1])
            else:
                lo = pick
        else:
            hi = pick
        used += word_count(texts[pick])
    return tuple(range(lo, hi + 1))


# --- book passages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """One sentence of a book: where it is (chapter offsets), the chunk it was read from, its text."""

    book_id: str
    chapter_id: str
    chapter_title: str
    chunk_id: str
    start: int
    end: int
    text: str  # whitespace normalised
    score: float = 0.0


@dataclass(frozen=True)
class Passage:
    """Consecutive sentences of one chapter, in book order, and the score of the best of them."""

    quotes: tuple[Quote, ...]
    score: float

    @property
    def text(self) -> str:
        return " ".join(q.text for q in self.quotes)

    @property
    def words(self) -> int:
        return word_count(self.text)


@dataclass(frozen=True)
class _Window:
    """A stretch of one chapter around evidence chunks: its sentences (chapter offsets) and text."""

    book_id: str
    chapter_id: str
    chapter_title: str
    spans: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]
    opens: tuple[bool, ...] = ()  # each sentence opens a paragraph (a blank line before it)


def _merged(hits: Sequence[Hit]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for h in sorted(hits, key=lambda h: h.start):
        if out and h.start <= out[-1][1] + 2 * MARGIN:
            out[-1] = (out[-1][0], max(out[-1][1], h.end))
        else:
            out.append((h.start, h.end))
    return out


def _window(hits: Sequence[Hit], lo: int, hi: int, chapter: str | None) -> _Window:
    """The sentences of the chapter text around [lo, hi) (or of the chunks' own text without it)."""
    first = hits[0]
    if chapter is not None and len(chapter) >= hi:
        a, b = max(0, lo - MARGIN), min(len(chapter), hi + MARGIN)
        text, base = chapter[a:b], a
        spans = [(s + a, e + a) for s, e in sentences(text)]
        if a > 0 and spans:  # the first sentence may be cut off: it is read only for the next one
            spans = spans[1:]
        if b < len(chapter) and spans:
            spans = spans[:-1]
        get = chapter
    else:  # the chunks' own text, stitched over their overlaps
        parts: dict[int, str] = {}
        for h in sorted(hits, key=lambda h: h.start):
            if lo <= h.start < hi:
                for i, ch in enumerate(h.text):
                    parts.setdefault(h.start + i, ch)
        base = lo
        text = "".join(parts.get(i, " ") for i in range(lo, hi))
        spans = [(s + base, e + base) for s, e in sentences(text)]
        if spans and needs_previous(text[spans[0][0] - base : spans[0][1] - base]) and text[:1].islower():
            spans = spans[1:]
        get = " " * base + text
    # a "sentence" without a word (Potter's ". . . ." rows, a lone dash) is not read
    spans = [(s, e) for s, e in spans if any(ch.isalnum() for ch in get[s:e])]
    return _Window(
        first.book_id,
        first.chapter_id,
        first.chapter_title,
        tuple(spans),
        tuple(" ".join(get[s:e].split()) for s, e in spans),
        tuple(i > 0 and "\n\n" in get[spans[i - 1][1] : s] for i, (s, _) in enumerate(spans)),
    )


def _chunk_of(span: tuple[int, int], hits: Sequence[Hit]) -> tuple[int, Hit] | None:
    """The best-ranked hit holding most of the sentence (its rank), or None outside every hit."""
    s, e = span
    for rank, h in enumerate(hits):
        if min(e, h.end) - max(s, h.start) >= (e - s) / 2:
            return rank, h
    return None


Unit = tuple[int, int, int]  # (window, first sentence, last sentence): one or two consecutive sentences


def _pronoun_credited(
    question: str, windows: Sequence[_Window], found: dict[tuple[int, int], frozenset[str]]
) -> dict[tuple[int, int], frozenset[str]]:
    """``found`` with a pronoun-led sentence counting the name its predecessor holds (``pronouns``)."""
    held = frozenset().union(*found.values())
    phrases = [(scoring.lemma_stems(p) & held, p.split()[-1]) for p in named_phrases(question)]
    names = [(stems, head) for stems, head in phrases if stems]
    if not names:
        return found
    out = dict(found)
    for w, win in enumerate(windows):
        keys = [(w, i) for i in range(len(win.texts))]
        for key, f in zip(keys, credited([found[k] for k in keys], win.texts, win.opens, names), strict=True):
            out[key] = f
    return out


def _unit_scores(
    question: str, windows: Sequence[_Window], ranks: dict[tuple[int, int], int], encoder: Any, max_words: int
) -> dict[Unit, float]:
    """Each unit's score: the question's stems found in any of its sentences (``found_terms``
    weights: two sentences together cover a question that spreads over them, and the answer often
    follows the sentence that repeats the question), minus ``UNIT_PENALTY`` for a second sentence,
    plus the question's kind (its best sentence), minus ``RANK_PRIOR`` per retrieval rank of its best
    ranked chunk, plus its length for a question asking for an event (``EVENT_LENGTH_WEIGHT``); a lone
    sentence over ``LONG_SENTENCE`` words scaled down by its length. A pair whose
    first sentence adds no word of the question to its second is no unit (the second answers alone). The
    ``PREFILTER`` best gain their meaning (cosine with the question, one batched encode). A unit holds
    at least one sentence of an evidence chunk (``ranks``) and two fit ``max_words``."""
    keys = [(w, i) for w, win in enumerate(windows) for i in range(len(win.texts))]
    titles = [windows[w].chapter_title if TITLE_CONTEXT else "" for w, _ in keys]
    found_list, weight = found_terms(question, [windows[w].texts[i] for w, i in keys], titles)
    found = dict(zip(keys, found_list, strict=True))
    kind = asked(question)
    if PRONOUN_NAMES and kind not in PRONOUN_SKIPS:
        found = _pronoun_credited(question, windows, found)
    focus = scoring.focus_terms(question)
    qwords = frozenset(words(question))
    typed = answer_type(question)
    name = asked_name(question)
    cue = {
        k: scoring.KIND_WEIGHT * scoring.kind_cue(kind, windows[k[0]].texts[k[1]], qwords)
        + scoring.TYPE_WEIGHT * scoring.type_cue(typed, windows[k[0]].texts[k[1]], qwords)
        + (INTRODUCING_WEIGHT if name and introduces(name, windows[k[0]].texts[k[1]]) else 0.0)
        for k in keys
    }
    # an event asked for ("What happened to Mr. Korbes ...?"): a unit that goes on tells more of it than a
    # short line repeating the question's names ("he was not at home")
    length_weight = EVENT_LENGTH_WEIGHT if asks_event(question) else 0.0
    out: dict[Unit, float] = {}
    for w, i in keys:
        win = windows[w]
        for j in range(i, min(i + UNIT_SENTENCES, len(win.texts))):
            inside = [ranks[(w, x)] for x in range(i, j + 1) if (w, x) in ranks]
            n = sum(word_count(win.texts[x]) for x in range(i, j + 1))
            if j > i and n > max_words:
                break
            if not inside:
                continue
            if j > i and found[(w, i)] <= found[(w, j)]:  # a first sentence adding no word of the question
                continue
            covered = frozenset().union(*(found[(w, x)] for x in range(i, j + 1)))
            v = (
                scoring.WORDS_WEIGHT * scoring.focused(covered, weight, focus)
                - UNIT_PENALTY * (j - i)
                + max(cue[(w, x)] for x in range(i, j + 1))
                - RANK_PRIOR * min(inside)
                + length_weight * min(n, EVENT_LENGTH_WORDS) / EVENT_LENGTH_WORDS
            )
            if j == i and n > LONG_SENTENCE and v > 0:  # a sentence longer than an answer may be
                v *= LONG_SENTENCE / n
            out[(w, i, j)] = v
    if encoder is not None and out:
        picked = sorted(out, key=lambda u: (-out[u], u))[:PREFILTER]
        vectors = remembered_encode(
            encoder,
            [
                getattr(encoder, "query_prefix", "") + search_text(question),  # the search's vector
                *(" ".join(windows[w].texts[i : j + 1]) for w, i, j in picked),
            ],
        )
        for u, v in zip(picked, vectors[1:], strict=True):
            out[u] += scoring.MEANING_WEIGHT * max(0.0, float(v @ vectors[0]))
    return out


def speaks(text: str) -> bool:
    """The sentence holds speech: an opening quotation mark (curly double or single, or a straight
    double one; a straight single one is also an apostrophe)."""
    return any(q in text for q in SPEECH_MARKS)


def _filled(
    texts: Sequence[str],
    lo: int,
    hi: int,
    free: Callable[[int], bool],
    max_words: int,
    opens: Sequence[bool] = (),
) -> range:
    """The unit ``lo..hi`` with the predecessors it needs to read on its own (two at most; not across a
    paragraph's start, ``opens``, unless ``CROSS_PARAGRAPH``), then the sentences that follow while they
    fit ``max_words`` (only sentences ``free`` says are not taken)."""
    used = sum(word_count(texts[x]) for x in range(lo, hi + 1))
    for _ in range(2):
        if lo == 0 or not free(lo - 1) or not needs_previous(texts[lo]):
            break
        if not CROSS_PARAGRAPH and lo < len(opens) and opens[lo]:
            break
        if used + word_count(texts[lo - 1]) > max_words:
            break
        lo -= 1
        used += word_count(texts[lo])
    while hi + 1 < len(texts) and free(hi + 1) and used + word_count(texts[hi + 1]) <= max_words:
        hi += 1
        used += word_count(texts[hi])
    # a short passage reads on: the sentence that follows joins past the budget (the answer often follows
    # the sentence that repeats the question: "... not allowed, and for this reason." / the reason); so
    # does one line of speech, whose reply or outcome follows ('... so give me my wages."' / "and he gave
    # him a lump of gold as big as his head")
    following = hi + 1 < len(texts) and free(hi + 1) and word_count(texts[hi + 1]) <= 2 * max_words
    if (used < SHORT_PASSAGE or (hi == lo and used < SPOKEN_PASSAGE and speaks(texts[lo]))) and following:
        hi += 1
    return range(lo, hi + 1)


def read_book(
    question: str,
    hits: Sequence[Hit],
    chapter_text: Callable[[str, str], str | None],
    encoder: Any = None,
    max_words: int = 60,
    max_passages: int = 5,
) -> tuple[Passage, ...]:
    """The ranked passages of the top evidence chunks (best first, not overlapping each other)."""
    top = _in_reading_order(hits[:MAX_CHUNKS]) if asks_what_name_is(question) else list(hits[:MAX_CHUNKS])
    if not top:
        return ()
    chapters: dict[tuple[str, str], list[Hit]] = {}
    for h in top:
        chapters.setdefault((h.book_id, h.chapter_id), []).append(h)
    windows: list[_Window] = []
    for (book_id, chapter_id), group in chapters.items():
        chapter = chapter_text(book_id, chapter_id)
        for lo, hi in _merged(group):
            windows.append(_window([h for h in group if lo <= h.start < hi], lo, hi, chapter))
    # candidates: sentences inside an evidence chunk, each once, with the rank of their chunk
    ranks: dict[tuple[int, int], int] = {}
    hit_of: dict[tuple[int, int], Hit] = {}
    for w, win in enumerate(windows):
        for i, span in enumerate(win.spans):
            found = _chunk_of(span, top)
            if found is not None and win.texts[i]:
                ranks[(w, i)], hit_of[(w, i)] = found
    if not ranks:
        return ()
    score = _unit_scores(question, windows, ranks, encoder, max_words)
    single = {(w, i): v for (w, i, j), v in score.items() if i == j}
    passages: list[Passage] = []
    taken: set[tuple[int, int]] = set()
    for (w, i, j), s in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(passages) >= max_passages:
            break
        if any((w, x) in taken for x in range(i, j + 1)):
            continue
        win = windows[w]
        quotes = []
        same = [h for h in hits if (h.book_id, h.chapter_id) == (win.book_id, win.chapter_id)]

        def free(y: int, w: int = w) -> bool:
            return (w, y) not in taken

        for x in _filled(win.texts, i, j, free, max_words, win.opens):
            taken.add((w, x))
            cited: Hit | None = hit_of.get((w, x)) or _nearest(win.spans[x], same)
            quotes.append(
                Quote(
                    win.book_id,
                    win.chapter_id,
                    win.chapter_title,
                    cited.chunk_id if cited else "",
                    win.spans[x][0],
                    win.spans[x][1],
                    win.texts[x],
                    single.get((w, x), 0.0),
                )
            )
        passages.append(Passage(tuple(quotes), s))
    return tuple(passages)


def first_mentioned(
    question: str, hits: Sequence[Hit], first_holding: Callable[[str, str], Hit | None]
) -> tuple[Hit, ...]:
    """``hits`` with, for a question asking what a name is, the chunk where the best hit's book first
    names it (``first_holding(book_id, name)``) read first: a book introduces a name where it first uses
    it ("Then I tried talk, and found that her name was Weena"; "a Dormouse was sitting between them, fast
    asleep"), which a search for the name alone does not rank first. Other questions, a name the book
    never writes, or a lookup that fails: ``hits`` as they are."""
    name = asked_name(question)
    if not name or not hits:
        return tuple(hits)
    try:
        first = first_holding(hits[0].book_id, name)
    except Exception:  # a broken store: read the evidence as found
        return tuple(hits)
    if first is None:
        return tuple(hits)
    return (first, *(h for h in hits if (h.book_id, h.chunk_id) != (first.book_id, first.chunk_id)))


def _in_reading_order(hits: Sequence[Hit]) -> list[Hit]:
    """The evidence of a question asking what a name is ("Who is Irene Adler?"): the best hit's chapter's
    chunks first, in reading order, then the others as ranked. Every chunk holds the name, so retrieval
    rank says little; a book says who or what a name is where it introduces it ("that woman was the late
    Irene Adler, of dubious and questionable memory"), not where the story later mentions it."""
    first = [h for h in hits if (h.book_id, h.chapter_id) == (hits[0].book_id, hits[0].chapter_id)]
    return sorted(first, key=lambda h: h.start) + [h for h in hits if h not in first]


def _nearest(span: tuple[int, int], hits: Sequence[Hit]) -> Hit | None:
    """The hit closest to a sentence outside every hit (a needed predecessor read from the chapter)."""
    same = [h for h in hits if h.start <= span[1] + 2 * MARGIN and h.end >= span[0] - 2 * MARGIN]
    return min(same, key=lambda h: min(abs(h.start - span[1]), abs(h.end - span[0])), default=None)


def answer_passages(passages: Sequence[Passage], max_words: int = 60) -> tuple[Passage, ...]:
    """The passages an answer shows: the best one, and a second from elsewhere (another chunk or
    chapter) only when it scores close to the best (``SECOND_SHARE``) and both fit ``max_words``."""
    if not passages:
        return ()
    first = passages[0]
    out = [first]
    for p in passages[1:2]:
        elsewhere = p.quotes[0].chapter_id != first.quotes[0].chapter_id or not (
            {q.chunk_id for q in p.quotes} & {q.chunk_id for q in first.quotes}
        )
        if elsewhere and p.score >= SECOND_SHARE * first.score and first.words + p.words <= max_words:
            out.append(p)
    return tuple(
        sorted(out, key=lambda p: (p.quotes[0].book_id, p.quotes[0].chapter_id, p.quotes[0].start))
        if len({p.quotes[0].chapter_id for p in out}) == 1
        else out
    )
