"""The concept-map lookup: ``concept_map_lookup(concept_map, query)`` finds a map's entities, themes and
events a query names, and the chapters they point to; ``format_matches`` prints what it found.

A plain helper module (never handed to a Hamilton driver); the concept map and its matches are values
of ``nodes.core.types``. Config: none. Limitations: below (exact words only).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from folio.nodes.core.text import STOPWORDS, base_words
from folio.nodes.core.types import HONORIFICS, ConceptMap, ConceptMatch, ConceptMatches

# --- the lookup ----------------------------------------------------------------------------------------
# Scoring: a query word hits an item through the words of its aliases (entities), keywords (themes) or
# its participants' aliases (events); titles ("Mr.", "Captain") and stop words never hit on their own.
# An item scores its best phrase as (share of the phrase in the query) x (share of the query it covers),
# themes x0.8, keyword k of n x(1 - 0.5 k / n); an event scores the sum of its participants, halved when
# one is not named. Matches below 0.3 x the best are dropped.
# Limitations: exact words only (no stemming, no synonyms, no embeddings): "whales" does not hit
# "whale", and a question about a theme in other words finds nothing.

_KIND_WEIGHT = {"entity": 1.0, "event": 1.0, "theme": 0.8}
_MIN_RELATIVE_SCORE = 0.3  # matches scoring below this fraction of the best match are dropped
_RANK_DECAY = 0.1  # an item's k-th chapter counts 1 / (1 + 0.1 k) of the item's score


@dataclass(frozen=True)
class _Item:
    kind: str
    item_id: str
    label: str
    chapter_ids: tuple[str, ...]
    prior: float  # mentions, chunks or co-occurrences: breaks ties between equal scores
    phrases: tuple[tuple[tuple[str, ...], float], ...]  # (words, weight)
    participants: tuple[int, ...] = ()  # for events: item indexes of the participant entities


@dataclass(frozen=True)
class _LookupIndex:
    items: tuple[_Item, ...]
    postings: dict[str, tuple[int, ...]]  # word -> items whose phrases hold it (titles excluded)
    titles: frozenset[str]  # honorifics and titles: they never hit an item on their own


_INDEXES: dict[int, tuple[weakref.ref[ConceptMap], _LookupIndex]] = {}


def _phrase_words(text: str) -> tuple[str, ...]:
    return tuple(base_words(text))


def _lookup_index(concept_map: ConceptMap) -> _LookupIndex:
    """Phrases and an inverted index of a concept map, built once per map object (pure)."""
    titles = frozenset(HONORIFICS)
    items: list[_Item] = []
    entity_item = {}
    for e in concept_map.entities:
        entity_item[e.entity_id] = len(items)
        phrases = tuple(dict.fromkeys((_phrase_words(a), 1.0) for a in e.aliases if _phrase_words(a)))
        items.append(_Item("entity", e.entity_id, e.name, e.chapter_ids, float(e.mentions), phrases))
    for t in concept_map.themes:
        n = max(1, len(t.keywords))
        phrases = tuple(
            (_phrase_words(k), 1.0 - 0.5 * i / n) for i, k in enumerate(t.keywords) if _phrase_words(k)
        )
        items.append(_Item("theme", t.theme_id, t.label, t.chapter_ids, float(t.size), phrases))
    for v in concept_map.events:
        members = tuple(entity_item[p] for p in v.participants if p in entity_item)
        items.append(_Item("event", v.event_id, v.label, v.chapter_ids, float(v.weight), (), members))
    postings: dict[str, set[int]] = defaultdict(set)
    for i, item in enumerate(items):
        for phrase, _ in item.phrases:
            for w in phrase:
                if w not in titles and w not in STOPWORDS:
                    postings[w].add(i)
        for member in item.participants:
            for phrase, _ in items[member].phrases:
                for w in phrase:
                    if w not in titles and w not in STOPWORDS:
                        postings[w].add(i)
    return _LookupIndex(tuple(items), {w: tuple(sorted(ids)) for w, ids in postings.items()}, titles)


def _cached_index(concept_map: ConceptMap) -> _LookupIndex:
    key = id(concept_map)
    entry = _INDEXES.get(key)
    if entry is not None and entry[0]() is concept_map:
        return entry[1]
    index = _lookup_index(concept_map)

    def forget(_: object, k: int = key) -> None:
        _INDEXES.pop(k, None)

    _INDEXES[key] = (weakref.ref(concept_map, forget), index)
    return index


def _phrase_score(phrase: tuple[str, ...], query: Sequence[str], query_set: frozenset[str]) -> float:
    """(share of the phrase found in the query) x (share of the query it covers); 1.0 = exact match."""
    matched = sum(1 for w in set(phrase) if w in query_set)
    if not matched:
        return 0.0
    return (matched / len(set(phrase))) * (matched / len(query_set))


def _item_score(index: _LookupIndex, i: int, query: Sequence[str], query_set: frozenset[str]) -> float:
    item = index.items[i]
    if item.kind == "event":
        scores = [_item_score(index, m, query, query_set) for m in item.participants]
        return sum(scores) * (1.0 if all(scores) else 0.5)
    return max((weight * _phrase_score(p, query, query_set) for p, weight in item.phrases), default=0.0)


def concept_map_lookup(concept_map: ConceptMap, query: str, limit: int = 10) -> ConceptMatches:
    """Entities, themes and events matching ``query``, best first, and the chapters they point to.

    Scores are in [0, 1] (theme scores x0.8); an event needs its participants named in the query for a
    full score. A chapter scores the sum over matching items of the item's score, decayed by the chapter's
    rank in that item's chapter list (so chapters where several matches meet come first).
    The map's lookup index is built on first use and kept while the map lives, so a lookup takes well
    under a millisecond.
    """
    index = _cached_index(concept_map)
    terms = [w for w in _phrase_words(query) if w not in STOPWORDS]
    query_set = frozenset(terms)
    candidates = sorted({i for w in query_set if w not in index.titles for i in index.postings.get(w, ())})
    scored = []
    for i in candidates:
        score = _item_score(index, i, terms, query_set) * _KIND_WEIGHT[index.items[i].kind]
        if score > 0:
            scored.append((round(score, 6), i))
    best = max((s for s, _ in scored), default=0.0)
    scored = [(s, i) for s, i in scored if s >= _MIN_RELATIVE_SCORE * best]
    scored.sort(key=lambda si: (-si[0], -index.items[si[1]].prior, index.items[si[1]].item_id))
    by_kind: dict[str, list[ConceptMatch]] = {"entity": [], "theme": [], "event": []}
    chapters: dict[str, float] = defaultdict(float)
    for score, i in scored:
        item = index.items[i]
        if len(by_kind[item.kind]) >= limit:
            continue
        by_kind[item.kind].append(ConceptMatch(item.kind, item.item_id, item.label, score, item.chapter_ids))
        for rank, chapter_id in enumerate(item.chapter_ids):
            chapters[chapter_id] += score / (1.0 + _RANK_DECAY * rank)
    ranked = sorted(chapters, key=lambda c: (-round(chapters[c], 9), c))
    return ConceptMatches(
        query=query,
        entities=tuple(by_kind["entity"]),
        themes=tuple(by_kind["theme"]),
        events=tuple(by_kind["event"]),
        chapter_ids=tuple(ranked[:limit]),
    )


_KIND_ORDER = {"entity": 0, "event": 1, "theme": 2}  # ties between equal scores in format_matches


def format_matches(
    matches: ConceptMatches, chapter_titles: Mapping[str, str] | None = None, max_chapters: int = 6
) -> str:
    """Human-readable lines for ``folio concepts``: one line per match, then the ranked chapters.

    Each match gives its kind, score and label, then its first ``max_chapters`` chapters (titles from
    ``chapter_titles`` when given, else ids). Matches of all kinds are merged by score.
    """
    titles = chapter_titles or {}

    def chapters(ids: Sequence[str]) -> str:
        shown = ", ".join(titles.get(c, c) for c in ids[:max_chapters])
        more = f" (+{len(ids) - max_chapters} more)" if len(ids) > max_chapters else ""
        return shown + more

    found = sorted(
        [*matches.entities, *matches.events, *matches.themes],
        key=lambda m: (-m.score, _KIND_ORDER[m.kind], m.label),
    )
    if not found:
        return f"no entities, themes or events match {matches.query!r}"
    lines = []
    for m in found:
        lines.append(f"{m.kind:<6}  {m.score:5.3f}  {m.label}")
        lines.append(f"        chapters: {chapters(m.chapter_ids)}")
    lines.append(f"best chapters: {chapters(matches.chapter_ids)}")
    return "\n".join(lines)
