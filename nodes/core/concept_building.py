"""The concept map of a book from its chapters, chunks and chunk vectors (pure, deterministic, no LLM).

``built_concept_map`` assembles the map: entities from ``nodes.core.concept_names``, themes by
clustering chunks, events from co-occurrences, each linked to chapters with excerpt pointers.

- Themes: agglomerative clustering (average linkage, distance threshold, no explicit k) of the book's
  chunks on ``w * cos(chunk vectors) + (1 - w) * cos(TF-IDF vectors)``; clusters of one chunk are
  dropped. Labelled by their top TF-IDF keyphrases (unigrams and bigrams).
- Events: pairs of entities mentioned in the same paragraph (or window of short paragraphs), labelled
  "Encounter: A + B".
- Every item keeps at most 24 chapter ids (strongest evidence first), top terms and up to two excerpt
  pointers inside chunk spans. Ids are hashes of content (names, member chunk ids), so the same book and
  config give a byte-identical ``ConceptMap.to_json()``.

Limitations: events are co-occurrences, not parsed actions.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from folio.nodes.core.concept_names import EntityDraft, entity_drafts, paragraphs
from folio.nodes.core.text import STOPWORDS, fold, words
from folio.nodes.core.types import Chunk, ConceptMap, Entity, Event, Evidence, Manifest, Theme

_MAX_ENTITIES = 200  # soft target for a novel; the hard cap is 500
_MAX_THEMES = 200
_MAX_EVENTS = 200  # soft target; the hard cap is 500
_MAX_CHAPTERS_PER_ITEM = 24
_MIN_EVENT_WEIGHT = 2
_N_TERMS = 6
_N_KEYWORDS = 8
_EXCERPT_CHARS = 400
_UNIT_MIN_CHARS = 400  # paragraphs shorter than this are joined into windows for co-occurrence

# fmt: off
_TERM_STOPWORDS = frozenset({
    "said", "says", "say", "mr", "mrs", "miss", "sir", "ye", "thee", "thou", "thy", "thine", "shall",
    "upon", "yes", "oh", "ah", "aye", "just", "like", "know", "think", "come", "came", "went", "go",
    "going", "got", "little", "great", "good", "way", "man", "men", "time", "thing", "things", "don",
    "ll", "ve", "re", "didn", "doesn", "isn", "wasn", "couldn", "wouldn",
})
# fmt: on


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
    return top_terms(local - terms.mean, terms.vocabulary, _N_TERMS, exclude)


def top_terms(
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


def theme_clusters(
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
    for members in theme_clusters(similarity, threshold):
        block = similarity[np.ix_(members, members)]
        cohesion = (block.sum() - np.trace(block)) / (len(members) * (len(members) - 1))
        weights = np.asarray(terms.chunk_tfidf[members].mean(axis=0)).ravel()
        keywords = top_terms(weights, terms.vocabulary, _N_KEYWORDS)
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
                theme_id=stable_id("thm", ids),
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


def stable_id(prefix: str, content: str) -> str:
    """A content-derived id: ``prefix-`` and 12 hex digits of the SHA-1 of ``content``."""
    return f"{prefix}-{hashlib.sha1(content.encode('utf-8')).hexdigest()[:12]}"


def _entities(drafts: Sequence[EntityDraft], terms: _Terms, locator: _Locator) -> tuple[Entity, ...]:
    entities = []
    seen: set[str] = set()
    for draft in drafts:
        entity_id = stable_id("ent", fold(draft.name))
        if entity_id in seen:  # two entities with one name ("Mrs. X" twice): tell them apart by aliases
            entity_id = stable_id("ent", fold("|".join(draft.aliases)))
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
    for start, end in paragraphs(text):
        if units and units[-1][1] - units[-1][0] < _UNIT_MIN_CHARS:
            units[-1] = (units[-1][0], end)
        else:
            units.append((start, end))
    return units


def _closest(a: Sequence[int], b: Sequence[int]) -> tuple[int, int]:
    """(distance, earlier position) of the closest pair of positions from two sorted lists."""
    return min((abs(x - y), min(x, y)) for x in a for y in b)


def _cooccurrences(
    drafts: Sequence[EntityDraft], chapter_texts: Sequence[str]
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
    drafts: Sequence[EntityDraft],
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
                event_id=stable_id("evt", "|".join(p.entity_id for p in participants)),
                label=f"Encounter: {participants[0].name} + {participants[1].name}",
                participants=tuple(p.entity_id for p in participants),
                weight=-negative_weight,
                chapter_ids=tuple(locator.chapter_ids[c] for c in chapters),
                terms=_contrast_terms(terms, in_chunks, name_words),
                excerpts=excerpts,
            )
        )
    return tuple(events)


def built_concept_map(
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
    drafts = entity_drafts(chapter_texts)[:_MAX_ENTITIES]
    entities = _entities(drafts, terms, locator)
    return ConceptMap(
        book_id=manifest.book_id,
        entities=entities,
        themes=_themes(chunks, chunk_chapter, vectors, terms, locator, threshold, centroid_weight),
        events=_events(drafts, entities, chapter_texts, terms, locator),
    )
