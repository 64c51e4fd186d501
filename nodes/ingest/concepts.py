"""Concept map: a compact, deterministic map of a book's entities, themes and events (no LLM).

The query side uses it to route a question to the right chapters: ``ConceptMap.lookup`` (``nodes.core.types``;
``nodes.core.concept_lookup`` formats its matches).

- Entities: capitalised spans that are not sentence-initial common words (a word or phrase counts as a
  name only if it is rarely written in lower case in the book), honorifics split off, then aliases merged:
  "Holmes", "Mr. Holmes" and "Mr. Sherlock Holmes" join "Sherlock Holmes" (a shorter name joins the
  dominant longer name that ends, or starts, with it; honorifics of the other gender never join), while
  "Mrs. Hudson" stays separate. One of the two must be a person, unless the text introduces the longer
  name and then shortens it: "Cheshire Cat" … "the Cat", "White Rabbit" … "the Rabbit" join (the longer
  is named first, and at least half of the chapters naming the shorter name the longer too), while
  "England", named alone in chapters without "New England", stays apart. Kept by salience (mentions
  and chapter spread).
- Themes: agglomerative clustering (average linkage, distance threshold, no explicit k) of the book's
  chunks on ``w * cos(chunk vectors) + (1 - w) * cos(TF-IDF vectors)``; clusters of one chunk are
  dropped. Labelled by their top TF-IDF keyphrases (unigrams and bigrams).
- Events: pairs of entities mentioned in the same paragraph (or window of short paragraphs), labelled
  "Encounter: A + B".
- Every item keeps at most 24 chapter ids (strongest evidence first), top terms and up to two excerpt
  pointers inside chunk spans. Ids are hashes of content (names, member chunk ids), so the same book and
  config give a byte-identical ``ConceptMap.to_json()``.

Differences from the design (issue 32, ``docs/design-differences.md``): no LLM normalises the map at
ingest (entity types, alias merging, theme labels): the deterministic merge above catches the design's
"Cat" / "Cheshire Cat" case (full Alice; before issue 32 they were two entities, as were "White
Rabbit" / "Rabbit" in the abridged Alice). Themes cluster chunks and each names the chapters its chunks
come from, rather than clustering whole chapters: a book of 12 stories could not reach the design's 25
themes otherwise; the counts below are in the design's 25-100 for a novel, and a short book gets fewer
(the abridged Alice, ~10k words in 10 chapters: 2).

Config keys: ``concept_theme_threshold`` (distance threshold, 1 - blended similarity; 0.52 gives
Sherlock 26 themes over 12 stories and Moby-Dick 84, on MiniLM window-mean chunk vectors with 120-token
windows; at 0.53 the largest cluster of each grows into a catch-all of 20-25% of the chunks),
``concept_centroid_weight`` (``w`` above, default 0.7).
Limitations: English capitalisation heuristics only; no coreference ("the woman", "he"); aliases that
share no words ("the White Whale" and "Moby Dick") stay separate entities; events are co-occurrences,
not parsed actions.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from folio.nodes.core.text import NAME_WORD, STOPWORDS, TITLE_ABBREVIATIONS, fold, words
from folio.nodes.core.types import (
    HONORIFICS,
    Chunk,
    ConceptMap,
    Entity,
    Event,
    Evidence,
    FolioError,
    Manifest,
    Theme,
)

_MAX_ENTITIES = 200  # soft target for a novel; the hard cap is 500
_MAX_THEMES = 200
_MAX_EVENTS = 200  # soft target; the hard cap is 500
_MAX_CHAPTERS_PER_ITEM = 24
_MIN_MENTIONS = 3
_MIN_EVENT_WEIGHT = 2
_MAX_ALIASES = 12
_N_TERMS = 6
_N_KEYWORDS = 8
_EXCERPT_CHARS = 400
_UNIT_MIN_CHARS = 400  # paragraphs shorter than this are joined into windows for co-occurrence
_LOWER_RATIO = 0.5  # a name may be written in lower case at most this often per capitalised use
_SHORTENED_SHARE = 0.5  # a shortened name ("the Rabbit") shares this share of its chapters with the full one

_PARAGRAPH = re.compile(r"\S(?:.|\n(?!\s*\n))*")
_ROMAN = re.compile(r"^[IVXLCDM]+$")
_SENTENCE_BREAK = frozenset('.!?:“"‘(—[')
# fmt: off
_ABBREVIATIONS = frozenset(fold(a) for a in TITLE_ABBREVIATIONS)
_NOT_NAMES = STOPWORDS | frozenset({
    "chapter", "book", "part", "volume", "contents", "epilogue", "prologue", "preface", "etymology",
    "extracts", "footnote", "appendix", "introduction", "conclusion", "finis", "end", "yes", "no", "oh",
    "ah", "o", "aye", "nay", "alas", "hark", "lo", "well", "now", "here", "there", "majesty", "highness",
    "lordship", "ladyship", "excellency", "honour", "grace", "monday", "tuesday", "wednesday",
    "thursday", "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
})
_TERM_STOPWORDS = frozenset({
    "said", "says", "say", "mr", "mrs", "miss", "sir", "ye", "thee", "thou", "thy", "thine", "shall",
    "upon", "yes", "oh", "ah", "aye", "just", "like", "know", "think", "come", "came", "went", "go",
    "going", "got", "little", "great", "good", "way", "man", "men", "time", "thing", "things", "don",
    "ll", "ve", "re", "didn", "doesn", "isn", "wasn", "couldn", "wouldn",
})
# fmt: on


# --- entities -------------------------------------------------------------------------------------

_Word = tuple[str, int, int, bool]  # (word, start, end, sentence_initial)
_fold = functools.lru_cache(maxsize=1 << 16)(fold)


@dataclass(frozen=True)
class _Mention:
    """One occurrence of a name: the name without honorifics, its honorific (if any) and its span."""

    name: str  # surface form of the name part, whitespace collapsed, possessive removed
    honorific: str  # surface form of the honorific prefix, "" if none
    chapter: int  # index into the book's chapters
    start: int  # span of the whole mention (honorific included)
    end: int
    initial: bool  # starts a sentence (capitalisation is no evidence there)


@dataclass
class _NameStats:
    key: str  # folded name
    tokens: tuple[str, ...]
    mentions: list[_Mention] = field(default_factory=list)
    genders: Counter[str] = field(default_factory=Counter)  # honorific uses per class


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """Spans of the blank-line separated paragraphs of a chapter."""
    return [m.span() for m in _PARAGRAPH.finditer(text)]


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper() and not (len(word) > 1 and word.isupper()) and not _ROMAN.match(word)


def _is_heading(text: str) -> bool:
    """A short title-case paragraph ("Chapter 91. The Pequod Meets the Rose-Bud."): no evidence of names."""
    found = NAME_WORD.findall(text)
    long_words = [w for w in found if len(w) >= 4]
    return len(found) <= 15 and len(long_words) >= 2 and all(map(_is_capitalised, long_words))


def _word_runs(text: str, start: int, end: int) -> Iterator[list[_Word]]:
    """Runs of capitalised words in ``text[start:end]``; each lower-case word comes as ``[("", s, e, i)]``.

    A run breaks at punctuation (except the period of an abbreviation: "Mr. Holmes", "St. Clair"), at a
    lower-case word and after a possessive ("Holmes's"). A word is sentence-initial after ``.!?:``, an
    opening quote or bracket, or a dash, and at the start of a paragraph.
    """
    run: list[_Word] = []
    prev_end: int | None = None
    prev_word = ""
    for match in NAME_WORD.finditer(text, start, end):
        word, s, e = match.group(), match.start(), match.end()
        gap = "" if prev_end is None else text[prev_end:s].strip()
        abbreviated = gap == "." and _fold(prev_word) in _ABBREVIATIONS
        initial = prev_end is None or (not abbreviated and any(c in _SENTENCE_BREAK for c in gap))
        if run and not (gap == "" or abbreviated):
            yield run
            run = []
        if _is_capitalised(word):
            possessive = len(word) > 2 and word[-2] in "'’" and word[-1] in "sS"
            base = word[:-2] if possessive else word
            run.append((base, s, s + len(base), initial))
            if possessive:
                yield run
                run = []
        else:
            if run:
                yield run
                run = []
            if word[:1].islower():
                yield [("", s, e, initial)]
        prev_end, prev_word = e, word
    if run:
        yield run


def _name_mentions(
    chapter: int, text: str, run: Sequence[_Word], is_name_word: Callable[[str], bool]
) -> Iterator[_Mention]:
    """Mentions in one capitalised run: stop words split it, leading common words are cut off.

    "But Ahab" gives "Ahab"; "Dear Mr. Sherlock Holmes" gives "Sherlock Holmes" with honorific "Mr.".
    """
    pieces: list[list[_Word]] = [[]]
    for w in run:
        key = _fold(w[0])
        if key in _NOT_NAMES and key not in HONORIFICS:
            pieces.append([])
        else:
            pieces[-1].append(w)
    for piece in pieces:
        titles = [i for i, w in enumerate(piece) if _fold(w[0]) in HONORIFICS]
        first_title = titles[0] if titles else len(piece)
        cut = 0
        if piece and piece[0][3] and not is_name_word(piece[0][0]) and first_title > 0:
            cut = 1  # a sentence-initial common word: "But Ahab", "Poor Queequeg"
        if titles and not all(is_name_word(w[0]) for w in piece[cut:first_title]):
            cut = first_title  # words before a title: "Dear Mr. Holmes"
        piece = piece[cut:]
        k = 0
        while k < len(piece) and _fold(piece[k][0]) in HONORIFICS:
            k += 1
        if k == len(piece):
            continue
        name = " ".join(text[piece[k][1] : piece[-1][2]].split())
        honorific = " ".join(text[piece[0][1] : piece[k][1]].split()) if k else ""
        yield _Mention(name, honorific, chapter, piece[0][1], piece[-1][2], piece[0][3] and k == 0)


def _part_of(mention: _Mention) -> str:
    """Honorific class of a mention: "bare" (none), "m", "f" or "" (a neutral title such as Captain)."""
    if not mention.honorific:
        return "bare"
    return HONORIFICS[_fold(mention.honorific.split()[-1].rstrip("."))]


def _own_groups(stats: _NameStats) -> dict[str, tuple[str, ...]]:
    """A name's honorific classes as groups: female uses split off when male uses exist too."""
    parts = sorted({_part_of(m) for m in stats.mentions})
    if "m" in parts and "f" in parts:
        return {"main": tuple(p for p in parts if p != "f"), "f": ("f",)}
    return {"main": tuple(parts)}


def _group_gender(parts: Sequence[str]) -> str:
    return "m" if "m" in parts else "f" if "f" in parts else "bare"


def _name_gender(stats: _NameStats) -> str:
    m, f = stats.genders["m"], stats.genders["f"]
    return "m" if m > f else "f" if f > m else ""


def _alias_target(
    stats: _NameStats, parts: Sequence[str], candidates: Iterable[_NameStats], titled: frozenset[str]
) -> _NameStats | None:
    """The longer name that the ``parts`` uses of ``stats`` are an alias of, or None.

    Candidates end with the name ("Holmes" -> "Sherlock Holmes"; the best needs twice the mentions of
    the next) or, for uses without honorific, start with it ("Irene" -> "Irene Adler"; only if unique
    and used at least as often, so "John" among "John Clay" and "John Turner" stays apart). One of the
    two must be a person (a surname in ``titled`` has been used with a title), so "England" stays apart
    from "New England", unless the text introduced the longer name first and then shortened it
    (``_shortened``: "White Rabbit" … "Rabbit"); a title of the other gender never joins.
    """
    n = len(stats.tokens)
    gender = _group_gender(parts)
    person = any(p != "bare" for p in parts)
    suffixes, prefixes = [], []
    for other in candidates:
        if len(other.tokens) <= n or not (person or other.tokens[-1] in titled or _shortened(stats, other)):
            continue
        if gender == "m" and _name_gender(other) == "f":
            continue
        if gender == "f" and _name_gender(other) == "m" and not other.genders["f"]:
            continue
        if other.tokens[-n:] == stats.tokens:
            suffixes.append(other)
        elif gender == "bare" and other.tokens[:n] == stats.tokens:
            prefixes.append(other)
    if suffixes:
        suffixes.sort(key=lambda s: (-len(s.mentions), s.key))
        if len(suffixes) == 1 or len(suffixes[0].mentions) >= 2 * len(suffixes[1].mentions):
            return suffixes[0]
        return None
    if len(prefixes) == 1 and len(prefixes[0].mentions) >= len(stats.mentions):
        return prefixes[0]
    return None


def _first(stats: _NameStats) -> tuple[int, int]:
    return min((m.chapter, m.start) for m in stats.mentions)


def _shortened(stats: _NameStats, longer: _NameStats) -> bool:
    """The text introduces ``longer`` and then shortens it to ``stats``, its last word(s): "a White
    Rabbit with pink eyes" … "the Rabbit". ``longer`` is mentioned first, and at least
    ``_SHORTENED_SHARE`` of the chapters naming ``stats`` name ``longer`` too ("England", named in
    chapters without "New England", stays apart)."""
    n = len(stats.tokens)
    if longer.tokens[-n:] != stats.tokens or not longer.mentions or _first(longer) > _first(stats):
        return False
    chapters = {m.chapter for m in stats.mentions}
    shared = chapters & {m.chapter for m in longer.mentions}
    return len(shared) >= _SHORTENED_SHARE * len(chapters)


def _merged_groups(names: Sequence[_NameStats]) -> list[list[tuple[_NameStats, tuple[str, ...]]]]:
    """Alias merging: groups of (name, honorific classes) that denote one entity (pure)."""
    order = sorted(names, key=lambda s: (-len(s.tokens), -len(s.mentions), s.key))
    titled = frozenset(s.tokens[-1] for s in names if s.genders)
    by_edge: dict[str, list[_NameStats]] = defaultdict(list)  # first and last word -> names, longest first
    for stats in order:
        for token in {stats.tokens[0], stats.tokens[-1]}:
            by_edge[token].append(stats)
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(node: tuple[str, str]) -> tuple[str, str]:
        while node in parent:
            node = parent[node]
        return node

    for stats in order:
        candidates = {id(o): o for t in {stats.tokens[0], stats.tokens[-1]} for o in by_edge[t]}.values()
        for group, parts in _own_groups(stats).items():
            target = _alias_target(stats, parts, candidates, titled)
            if target is not None:
                female = _group_gender(parts) == "f" and "f" in _own_groups(target)
                parent[(stats.key, group)] = root((target.key, "f" if female else "main"))
    members: dict[tuple[str, str], list[tuple[_NameStats, tuple[str, ...]]]] = defaultdict(list)
    for stats in order:
        for group, parts in _own_groups(stats).items():
            members[root((stats.key, group))].append((stats, parts))
    return [members[k] for k in sorted(members)]


def _surface(mention: _Mention) -> str:
    return f"{mention.honorific} {mention.name}".strip()


def _canonical_name(group: Sequence[tuple[_NameStats, tuple[str, ...]]], total: int) -> str:
    """The longest name used for at least 5% of the mentions, without honorific when it is used so."""
    usable = [
        (stats, parts)
        for stats, parts in group
        if sum(_part_of(m) in parts for m in stats.mentions) >= 0.05 * total
    ] or list(group)
    stats, parts = min(usable, key=lambda sp: (-len(sp[0].tokens), -len(sp[0].mentions), sp[0].key))
    mentions = [m for m in stats.mentions if _part_of(m) in parts]
    bare = Counter(m.name for m in mentions if not m.honorific)
    titled = Counter(_surface(m) for m in mentions if m.honorific)
    if bare and (len(stats.tokens) > 1 or sum(bare.values()) >= sum(titled.values()) / 2):
        return max(bare.items(), key=lambda kv: (kv[1], kv[0]))[0]
    if len(stats.tokens) > 1:
        return max(Counter(m.name for m in mentions).items(), key=lambda kv: (kv[1], kv[0]))[0]
    return max((titled or bare).items(), key=lambda kv: (kv[1], kv[0]))[0]


def _salience(mentions: Sequence[_Mention]) -> float:
    return len(mentions) * (1.0 + math.log(len({m.chapter for m in mentions})))


@dataclass(frozen=True)
class _EntityDraft:
    name: str
    aliases: tuple[str, ...]
    mentions: tuple[_Mention, ...]  # in reading order


def _entity_drafts(chapter_texts: Sequence[str]) -> list[_EntityDraft]:
    """Named entities of a book, aliases merged, most salient first (pure; golden-tested).

    A one-word name must be capitalised mid-sentence and written in lower case at most ``_LOWER_RATIO``
    times as often ("Ahab" yes, "The" and "Captain" no); a longer name is tested as a phrase ("White
    Whale" against "white whale"). A common word used with a title keeps only its titled uses.
    """
    lower: Counter[str] = Counter()
    cap_mid: Counter[str] = Counter()
    runs: list[tuple[int, list[_Word]]] = []
    for c, text in enumerate(chapter_texts):
        for start, end in _paragraphs(text):
            heading = _is_heading(text[start:end])
            for run in _word_runs(text, start, end):
                if run[0][0] == "":
                    lower[_fold(text[run[0][1] : run[0][2]])] += 1
                elif not heading:
                    cap_mid.update(_fold(w) for w, _, _, initial in run if not initial)
                    runs.append((c, run))

    def is_name_word(word: str) -> bool:
        key = _fold(word)
        return key not in _NOT_NAMES and cap_mid[key] > 0 and lower[key] <= _LOWER_RATIO * cap_mid[key]

    stats_by_key: dict[str, _NameStats] = {}
    for c, run in runs:
        for mention in _name_mentions(c, chapter_texts[c], run, is_name_word):
            key = _fold(mention.name)
            tokens = tuple(key.replace(".", " ").split())
            if sum(map(len, tokens)) < 2:
                continue  # initials ("K. K. K.")
            stats = stats_by_key.setdefault(key, _NameStats(key, tokens))
            stats.mentions.append(mention)
            if mention.honorific:
                stats.genders[_part_of(mention)] += 1

    flat = " ".join(" ".join(text.split()) for text in chapter_texts)
    names = []
    for stats in stats_by_key.values():
        uses = sum(1 for m in stats.mentions if not m.initial)
        low = lower[stats.key] if len(stats.tokens) == 1 else flat.count(stats.key)
        if uses and low <= _LOWER_RATIO * uses:
            names.append(stats)
        elif len(stats.tokens) == 1 and sum(stats.genders.values()) >= 2:
            stats.mentions = [m for m in stats.mentions if m.honorific]  # "Mrs. Hudson", not "hudson"
            names.append(stats)

    drafts = []
    for group in _merged_groups(names):
        mentions = sorted(
            (m for stats, parts in group for m in stats.mentions if _part_of(m) in parts),
            key=lambda m: (m.chapter, m.start),
        )
        if len(mentions) < _MIN_MENTIONS:
            continue
        name = _canonical_name(group, len(mentions))
        surfaces = Counter(_surface(m) for m in mentions)
        ranked = [s for s, _ in sorted(surfaces.items(), key=lambda kv: (-kv[1], kv[0])) if s != name]
        drafts.append(_EntityDraft(name, (name, *ranked)[:_MAX_ALIASES], tuple(mentions)))
    drafts.sort(key=lambda d: (-_salience(d.mentions), d.name))
    return drafts


# --- evidence -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Locator:
    """Where the chunks of each chapter are, to turn chapter offsets into excerpt pointers."""

    chunks: Sequence[Chunk]
    chapter_ids: tuple[str, ...]
    by_chapter: tuple[tuple[int, ...], ...]  # chunk indexes of each chapter, by start
    starts: tuple[tuple[int, ...], ...]


def _locator(manifest: Manifest, chunks: Sequence[Chunk]) -> _Locator:
    chapter_ids = tuple(c.chapter_id for c in manifest.chapters)
    index = {cid: i for i, cid in enumerate(chapter_ids)}
    by_chapter: list[list[int]] = [[] for _ in chapter_ids]
    for i, chunk in enumerate(chunks):
        by_chapter[index[chunk.chapter_id]].append(i)
    ordered = tuple(tuple(sorted(m, key=lambda i: (chunks[i].start, chunks[i].end))) for m in by_chapter)
    return _Locator(chunks, chapter_ids, ordered, tuple(tuple(chunks[i].start for i in m) for m in ordered))


def _chunk_at(locator: _Locator, chapter: int, position: int) -> int | None:
    """Index of the first chunk of ``chapter`` whose span holds ``position`` (else the nearest one)."""
    members = locator.by_chapter[chapter]
    if not members:
        return None
    k = max(0, bisect.bisect_right(locator.starts[chapter], position) - 1)
    while k > 0 and locator.chunks[members[k - 1]].end > position:
        k -= 1  # overlapping chunks: the earliest that holds the position
    if position >= locator.chunks[members[k]].end and k + 1 < len(members):
        k += 1
    return members[k]


def _evidence(locator: _Locator, chapter: int, start: int) -> Evidence | None:
    """A pointer of at most ``_EXCERPT_CHARS`` starting a little before ``start``, inside one chunk."""
    i = _chunk_at(locator, chapter, start)
    if i is None:
        return None
    chunk = locator.chunks[i]
    lo = max(chunk.start, min(start, chunk.end - 1) - _EXCERPT_CHARS // 4)
    return Evidence(locator.chapter_ids[chapter], chunk.chunk_id, lo, min(chunk.end, lo + _EXCERPT_CHARS))


def _top_chapters(counts: Counter[int], limit: int = _MAX_CHAPTERS_PER_ITEM) -> list[int]:
    """Chapter indexes by evidence count, then reading order."""
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


# --- keyphrases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Terms:
    vocabulary: tuple[str, ...]
    chunk_tfidf: Any  # scipy.sparse csr (n_chunks x n_terms), rows L2-normalised
    mean: np.ndarray  # mean TF-IDF row of the book


def _vectorizer_stop_words(english: frozenset[str]) -> list[str]:
    """English stop words split the way the vectorizer splits text ("aren't" -> "aren")."""
    return sorted(
        {part for w in english | STOPWORDS | _TERM_STOPWORDS for part in re.split(r"\W+", w) if len(part) > 1}
    )


def _terms(chunk_texts: Sequence[str]) -> _Terms:
    """TF-IDF keyphrases (unigrams and bigrams, English stop words removed) of every chunk."""
    from scipy import sparse
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer, TfidfTransformer

    n = len(chunk_texts)
    vectorizer = CountVectorizer(
        ngram_range=(1, 2),
        token_pattern=r"(?u)\b[^\W\d_]{2,}\b",
        stop_words=_vectorizer_stop_words(ENGLISH_STOP_WORDS),
        min_df=2 if n >= 10 else 1,
        max_df=0.5 if n >= 10 else 1.0,
        dtype=np.float64,
    )
    try:
        counts = vectorizer.fit_transform(chunk_texts)
    except ValueError:  # no terms at all (empty or tiny book)
        return _Terms((), sparse.csr_matrix((n, 0)), np.zeros(0))
    tfidf = sparse.csr_matrix(TfidfTransformer(sublinear_tf=True).fit_transform(counts))
    return _Terms(tuple(vectorizer.get_feature_names_out()), tfidf, np.asarray(tfidf.mean(axis=0)).ravel())


def _contrast_terms(
    terms: _Terms, chunk_counts: Counter[int | None], exclude: frozenset[str]
) -> tuple[str, ...]:
    """Terms that set some chunks apart: their count-weighted mean TF-IDF minus the book's mean."""
    if not terms.vocabulary or not chunk_counts:
        return ()
    rows = sorted(i for i in chunk_counts if i is not None)
    weights = np.asarray([chunk_counts[i] for i in rows], dtype=np.float64)
    local = np.asarray(terms.chunk_tfidf[rows].multiply(weights[:, None]).sum(axis=0)).ravel() / weights.sum()
    return _top_terms(local - terms.mean, terms.vocabulary, _N_TERMS, exclude)


def _top_terms(
    weights: np.ndarray, vocabulary: Sequence[str], n: int, exclude: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """The ``n`` heaviest terms without excluded words; a bigram replaces a chosen unigram it contains."""
    out: list[str] = []
    for i in np.argsort(-np.asarray(weights, dtype=np.float64), kind="stable"):
        if weights[i] <= 0 or len(out) == n:
            break
        term = vocabulary[i]
        parts = term.split()
        if any(p in exclude for p in parts) or len(set(parts)) < len(parts):
            continue  # excluded words, or a repeated word ("queequeg queequeg")
        inside = [k for k, t in enumerate(out) if t in parts or term in t.split() or t == term]
        if not inside:
            out.append(term)
        elif len(parts) > 1 and all(" " not in out[k] for k in inside):
            out[inside[0]] = term
            for k in reversed(inside[1:]):
                del out[k]
    return tuple(out)


# --- themes ---------------------------------------------------------------------------------------


def _blended_similarity(vectors: np.ndarray, keyword_rows: Any, centroid_weight: float) -> np.ndarray:
    """``w * cos(vectors) + (1 - w) * cos(keyword vectors)`` for every pair of rows."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms == 0, 1.0, norms)
    semantic = v @ v.T
    keyword = np.asarray((keyword_rows @ keyword_rows.T).todense(), dtype=np.float64)
    return centroid_weight * semantic + (1.0 - centroid_weight) * keyword


def _theme_clusters(
    similarity: np.ndarray, threshold: float, max_themes: int = _MAX_THEMES
) -> list[list[int]]:
    """Clusters of at least two rows, by average-linkage agglomerative clustering at a distance threshold.

    If the threshold leaves more than ``max_themes`` clusters, the tree is cut at ``max_themes`` instead.
    Clusters come largest first, ties by first member.
    """
    from sklearn.cluster import AgglomerativeClustering

    n = similarity.shape[0]
    if n < 2:
        return []
    distance = np.clip(1.0 - (similarity + similarity.T) / 2.0, 0.0, 2.0)
    np.fill_diagonal(distance, 0.0)

    def clusters(**kwargs: object) -> list[list[int]]:
        labels = (
            AgglomerativeClustering(metric="precomputed", linkage="average", **kwargs).fit(distance).labels_
        )
        groups: dict[int, list[int]] = defaultdict(list)
        for i, label in enumerate(labels):
            groups[int(label)].append(i)
        return sorted((g for g in groups.values() if len(g) >= 2), key=lambda g: (-len(g), g[0]))

    found = clusters(n_clusters=None, distance_threshold=float(threshold))
    if len(found) > max_themes:
        found = clusters(n_clusters=max_themes)[:max_themes]
    return found


def _themes(
    chunks: Sequence[Chunk],
    chunk_chapter: Sequence[int],
    vectors: np.ndarray,
    terms: _Terms,
    locator: _Locator,
    threshold: float,
    centroid_weight: float,
) -> tuple[Theme, ...]:
    if not chunks:
        return ()
    similarity = _blended_similarity(vectors, terms.chunk_tfidf, centroid_weight)
    n_chapters = len(locator.chapter_ids)
    chapter_sums = np.zeros((n_chapters, vectors.shape[1]), dtype=np.float64)
    np.add.at(chapter_sums, np.asarray(chunk_chapter), np.asarray(vectors, dtype=np.float64))
    centroids = chapter_sums / np.maximum(np.linalg.norm(chapter_sums, axis=1, keepdims=True), 1e-12)
    themes = []
    for members in _theme_clusters(similarity, threshold):
        block = similarity[np.ix_(members, members)]
        cohesion = (block.sum() - np.trace(block)) / (len(members) * (len(members) - 1))
        weights = np.asarray(terms.chunk_tfidf[members].mean(axis=0)).ravel()
        keywords = _top_terms(weights, terms.vocabulary, _N_KEYWORDS)
        centre = np.asarray(vectors, dtype=np.float64)[members].mean(axis=0)
        closeness = centroids @ centre
        counts = Counter(chunk_chapter[i] for i in members)
        chapters = sorted(counts, key=lambda c: (-counts[c], -round(float(closeness[c]), 9), c))
        central = sorted(members, key=lambda i: (-round(float(block[members.index(i)].mean()), 9), i))[:2]
        excerpts = tuple(
            e for i in central if (e := _evidence(locator, chunk_chapter[i], chunks[i].start)) is not None
        )
        ids = "|".join(chunks[i].chunk_id for i in members)
        themes.append(
            Theme(
                theme_id=_stable_id("thm", ids),
                label=" / ".join(keywords[:3]) or chunks[members[0]].text[:40].strip(),
                keywords=keywords,
                size=len(members),
                cohesion=round(float(cohesion), 4),
                chapter_ids=tuple(locator.chapter_ids[c] for c in chapters[:_MAX_CHAPTERS_PER_ITEM]),
                excerpts=excerpts,
            )
        )
    return tuple(themes)


# --- entities and events --------------------------------------------------------------------------


def _stable_id(prefix: str, content: str) -> str:
    """A content-derived id: ``prefix-`` and 12 hex digits of the SHA-1 of ``content``."""
    return f"{prefix}-{hashlib.sha1(content.encode('utf-8')).hexdigest()[:12]}"


def _entities(drafts: Sequence[_EntityDraft], terms: _Terms, locator: _Locator) -> tuple[Entity, ...]:
    entities = []
    seen: set[str] = set()
    for draft in drafts:
        entity_id = _stable_id("ent", fold(draft.name))
        if entity_id in seen:  # two entities with one name ("Mrs. X" twice): tell them apart by aliases
            entity_id = _stable_id("ent", fold("|".join(draft.aliases)))
        seen.add(entity_id)
        counts = Counter(m.chapter for m in draft.mentions)
        chapters = _top_chapters(counts)
        first: dict[int, Any] = {}
        for m in draft.mentions:
            first.setdefault(m.chapter, m)
        excerpts = tuple(e for c in chapters[:2] if (e := _evidence(locator, c, first[c].start)) is not None)
        name_words = frozenset(w for a in draft.aliases for w in words(a))
        in_chunks = Counter(_chunk_at(locator, m.chapter, m.start) for m in draft.mentions)
        in_chunks.pop(None, None)
        entities.append(
            Entity(
                entity_id=entity_id,
                name=draft.name,
                aliases=draft.aliases,
                mentions=len(draft.mentions),
                chapter_ids=tuple(locator.chapter_ids[c] for c in chapters),
                terms=_contrast_terms(terms, in_chunks, name_words),
                excerpts=excerpts,
            )
        )
    return tuple(entities)


def _units(text: str) -> list[tuple[int, int]]:
    """Co-occurrence units of a chapter: paragraphs, short ones joined into windows of ``_UNIT_MIN_CHARS``."""
    units: list[tuple[int, int]] = []
    for start, end in _paragraphs(text):
        if units and units[-1][1] - units[-1][0] < _UNIT_MIN_CHARS:
            units[-1] = (units[-1][0], end)
        else:
            units.append((start, end))
    return units


def _closest(a: Sequence[int], b: Sequence[int]) -> tuple[int, int]:
    """(distance, earlier position) of the closest pair of positions from two sorted lists."""
    return min((abs(x - y), min(x, y)) for x in a for y in b)


def _cooccurrences(
    drafts: Sequence[_EntityDraft], chapter_texts: Sequence[str]
) -> dict[tuple[int, int], dict[int, list[tuple[int, int]]]]:
    """For each pair of entities (by rank), per chapter, the units where both are mentioned (pure).

    Each unit is given as (distance, position) of the closest two mentions of the pair in it.
    """
    starts = [[u[0] for u in _units(text)] for text in chapter_texts]
    present: dict[tuple[int, int], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for rank, draft in enumerate(drafts):
        for m in draft.mentions:
            unit = max(0, bisect.bisect_right(starts[m.chapter], m.start) - 1)
            present[(m.chapter, unit)][rank].append(m.start)
    pairs: dict[tuple[int, int], dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for (chapter, _), positions in sorted(present.items()):
        ordered = sorted(positions)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                pairs[(a, b)][chapter].append(_closest(positions[a], positions[b]))
    return pairs


def _events(
    drafts: Sequence[_EntityDraft],
    entities: Sequence[Entity],
    chapter_texts: Sequence[str],
    terms: _Terms,
    locator: _Locator,
) -> tuple[Event, ...]:
    ranked = []
    for (a, b), by_chapter in _cooccurrences(drafts, chapter_texts).items():
        weight = sum(len(positions) for positions in by_chapter.values())
        if weight >= _MIN_EVENT_WEIGHT:
            ranked.append((-weight, a, b, by_chapter))
    ranked.sort(key=lambda r: r[:3])
    events = []
    for negative_weight, a, b, by_chapter in ranked[:_MAX_EVENTS]:
        counts = Counter({c: len(positions) for c, positions in by_chapter.items()})
        chapters = _top_chapters(counts)
        excerpts = tuple(
            e for c in chapters[:2] if (e := _evidence(locator, c, min(by_chapter[c])[1])) is not None
        )
        participants = (entities[a], entities[b])
        name_words = frozenset(w for p in participants for alias in p.aliases for w in words(alias))
        in_chunks = Counter(
            _chunk_at(locator, c, position) for c, units in by_chapter.items() for _, position in units
        )
        in_chunks.pop(None, None)
        events.append(
            Event(
                event_id=_stable_id("evt", "|".join(p.entity_id for p in participants)),
                label=f"Encounter: {participants[0].name} + {participants[1].name}",
                participants=tuple(p.entity_id for p in participants),
                weight=-negative_weight,
                chapter_ids=tuple(locator.chapter_ids[c] for c in chapters),
                terms=_contrast_terms(terms, in_chunks, name_words),
                excerpts=excerpts,
            )
        )
    return tuple(events)


def _concept_map(
    manifest: Manifest,
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    threshold: float,
    centroid_weight: float,
) -> ConceptMap:
    """The whole map from validated inputs (pure)."""
    chapter_index = {c.chapter_id: i for i, c in enumerate(manifest.chapters)}
    chunk_chapter = [chapter_index[c.chapter_id] for c in chunks]
    chapter_texts = [c.text for c in manifest.chapters]
    locator = _locator(manifest, chunks)
    terms = _terms([c.text for c in chunks])
    drafts = _entity_drafts(chapter_texts)[:_MAX_ENTITIES]
    entities = _entities(drafts, terms, locator)
    return ConceptMap(
        book_id=manifest.book_id,
        entities=entities,
        themes=_themes(chunks, chunk_chapter, vectors, terms, locator, threshold, centroid_weight),
        events=_events(drafts, entities, chapter_texts, terms, locator),
    )


def concept_map(
    manifest: Manifest,
    chunks: tuple[Chunk, ...],
    chunk_vectors: np.ndarray,
    concept_theme_threshold: float = 0.52,
    concept_centroid_weight: float = 0.7,
) -> ConceptMap:
    """The book's concept map: entities, themes and events linked to chapters (deterministic)."""
    source = manifest.source_file or manifest.book_id
    vectors = np.asarray(chunk_vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(chunks):
        raise FolioError(
            source, f"{vectors.shape[0] if vectors.ndim else 0} chunk vectors for {len(chunks)} chunks"
        )
    known = {c.chapter_id for c in manifest.chapters}
    if any(c.chapter_id not in known for c in chunks):
        raise FolioError(source, "a chunk names a chapter that is not in the manifest")
    if not 0.0 <= float(concept_centroid_weight) <= 1.0:
        raise FolioError("concept_centroid_weight", f"{concept_centroid_weight} is not between 0 and 1")
    if not 0.0 < float(concept_theme_threshold) <= 2.0:
        raise FolioError("concept_theme_threshold", f"{concept_theme_threshold} is not in (0, 2]")
    return _concept_map(
        manifest, chunks, vectors, float(concept_theme_threshold), float(concept_centroid_weight)
    )
