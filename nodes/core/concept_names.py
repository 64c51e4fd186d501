"""Named entities of a book for its concept map: capitalised names found, aliases merged (pure, no LLM).

``entity_drafts(chapter_texts)`` gives the entities most salient first, each with its canonical name,
aliases and mentions; ``nodes.core.concept_building`` turns them into ``Entity`` items and events.

- Entities: capitalised spans that are not sentence-initial common words (a word or phrase counts as a
  name only if it is rarely written in lower case in the book), honorifics split off, then aliases merged:
  "Holmes", "Mr. Holmes" and "Mr. Sherlock Holmes" join "Sherlock Holmes" (a shorter name joins the
  dominant longer name that ends, or starts, with it; honorifics of the other gender never join), while
  "Mrs. Hudson" stays separate. One of the two must be a person, unless the text introduces the longer
  name and then shortens it: "Cheshire Cat" … "the Cat", "White Rabbit" … "the Rabbit" join (the longer
  is named first, and at least half of the chapters naming the shorter name the longer too), while
  "England", named alone in chapters without "New England", stays apart. Kept by salience (mentions
  and chapter spread).

Limitations: English capitalisation heuristics only; no coreference ("the woman", "he"); aliases that
share no words ("the White Whale" and "Moby Dick") stay separate entities.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from folio.nodes.core.text import NAME_WORD, STOPWORDS, TITLE_ABBREVIATIONS, fold
from folio.nodes.core.types import HONORIFICS

_MIN_MENTIONS = 3
_MAX_ALIASES = 12
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


def paragraphs(text: str) -> list[tuple[int, int]]:
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
class EntityDraft:
    name: str
    aliases: tuple[str, ...]
    mentions: tuple[_Mention, ...]  # in reading order


def entity_drafts(chapter_texts: Sequence[str]) -> list[EntityDraft]:
    """Named entities of a book, aliases merged, most salient first (pure; golden-tested).

    A one-word name must be capitalised mid-sentence and written in lower case at most ``_LOWER_RATIO``
    times as often ("Ahab" yes, "The" and "Captain" no); a longer name is tested as a phrase ("White
    Whale" against "white whale"). A common word used with a title keeps only its titled uses.
    """
    lower: Counter[str] = Counter()
    cap_mid: Counter[str] = Counter()
    runs: list[tuple[int, list[_Word]]] = []
    for c, text in enumerate(chapter_texts):
        for start, end in paragraphs(text):
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
        drafts.append(EntityDraft(name, (name, *ranked)[:_MAX_ALIASES], tuple(mentions)))
    drafts.sort(key=lambda d: (-_salience(d.mentions), d.name))
    return drafts
