"""The LLM's normalisation of a concept map at ingest: entity types, merged aliases, theme labels (pure).

One bounded call per book (``concept_map__openai`` in ``nodes/ingest/concepts.py``): the deterministic
map's ``NORMALISED_ENTITIES`` most salient entities (name, aliases, top terms) and ``NORMALISED_THEMES``
largest themes (keywords), under short ids ("E1", "T1"), and the LLM replies with one JSON object:

    {"entities": [{"id": "E3", "type": "person", "same_as": "E1"}, ...],
     "themes": [{"id": "T1", "label": "the trial of the Knave"}, ...]}

The reply is validated row by row: an unknown id, a type outside ``ENTITY_TYPES``, a ``same_as`` naming
itself or an unknown id, or an empty or over-long label is dropped (counted in a note). ``same_as``
merges an entity into the other: the one with more mentions (on a tie, the one named) keeps its name
and id, aliases, mentions and chapters are joined, and events are re-pointed to it. A reply with no
usable row, or a failed call, leaves the deterministic map, with a note saying why
(``ConceptMap.notes``).

Limitations: the LLM sees names, aliases and top terms, not the text; entities and themes past the
bounds keep no type and their keyword labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from folio.nodes.core.types import ConceptMap, Entity, Event

ENTITY_TYPES = ("person", "place", "organisation", "object", "other")
NORMALISED_ENTITIES = 40
NORMALISED_THEMES = 40
NORMALISE_MAX_TOKENS = 1600
_MAX_LABEL_CHARS = 60
_MAX_LABEL_WORDS = 8
_MAX_ALIASES = 12
_MAX_CHAPTERS = 24

NORMALISE_SCHEMA: dict[str, Any] = {
    "title": "concept_map_normalisation",
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "type": {"type": "string", "enum": list(ENTITY_TYPES)},
                    "same_as": {"type": ["string", "null"]},
                },
                "required": ["id", "type"],
            },
        },
        "themes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "label": {"type": "string"}},
                "required": ["id", "label"],
            },
        },
    },
    "required": ["entities", "themes"],
}


def shown_ids(cmap: ConceptMap) -> tuple[dict[str, str], dict[str, str]]:
    """The short ids the LLM sees: "E1".. for the first entities, "T1".. for the first themes."""
    entities = {f"E{i}": e.entity_id for i, e in enumerate(cmap.entities[:NORMALISED_ENTITIES], 1)}
    themes = {f"T{i}": t.theme_id for i, t in enumerate(cmap.themes[:NORMALISED_THEMES], 1)}
    return entities, themes


def normalisation_messages(cmap: ConceptMap, title: str) -> list[dict[str, str]]:
    """The one request of a book: the instructions, then its entities and themes under short ids."""
    entities, themes = shown_ids(cmap)
    by_id = {e.entity_id: e for e in cmap.entities}
    theme_by_id = {t.theme_id: t for t in cmap.themes}
    lines = [f"Book: {title}", "", "Entities:"]
    for short, entity_id in entities.items():
        e = by_id[entity_id]
        aliases = ", ".join(a for a in e.aliases[1:5]) or "none"
        lines.append(f"{short}: {e.name} (aliases: {aliases}; words near it: {', '.join(e.terms[:4])})")
    lines += ["", "Themes:"]
    lines += [f"{short}: {', '.join(theme_by_id[tid].keywords[:6])}" for short, tid in themes.items()]
    system = (
        "You tidy the concept map of a book. For every entity give its type, one of "
        f"{', '.join(ENTITY_TYPES)}; when an entity is another listed entity under a shorter or other "
        'name (for example "Cat" and "Cheshire Cat"), give that entity\'s id as same_as, else null. '
        "For every theme give a short label of 2 to 6 words saying what its passages are about. "
        "Use only the listed ids."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


@dataclasses.dataclass(frozen=True)
class Normalisation:
    """What a reply asks, validated: types and merges by entity id, labels by theme id."""

    types: Mapping[str, str]
    merges: Mapping[str, str]  # entity id -> the entity id it joins
    labels: Mapping[str, str]
    dropped: int  # rows (or fields) of the reply that were not usable


def _label(value: object) -> str | None:
    text = " ".join(str(value).split()) if isinstance(value, str) else ""
    if not text or len(text) > _MAX_LABEL_CHARS or len(text.split()) > _MAX_LABEL_WORDS:
        return None
    return text


def _rows(answer: Mapping[str, Any], key: str) -> list[Any]:
    rows = answer.get(key)
    return list(rows) if isinstance(rows, list) else []


def parsed_normalisation(answer: Mapping[str, Any], cmap: ConceptMap) -> Normalisation:
    """The usable part of a reply (unknown ids, types and bad labels dropped); ``ValueError`` if none."""
    entities, themes = shown_ids(cmap)
    types: dict[str, str] = {}
    merges: dict[str, str] = {}
    labels: dict[str, str] = {}
    dropped = 0
    for row in _rows(answer, "entities"):
        entity_id = entities.get(str(row.get("id"))) if isinstance(row, dict) else None
        if entity_id is None:
            dropped += 1
            continue
        kind = str(row.get("type") or "").strip().lower()
        if kind in ENTITY_TYPES:
            types[entity_id] = kind
        else:
            dropped += 1
        same = row.get("same_as")
        if same not in (None, "", "null"):
            target = entities.get(str(same))
            if target is None or target == entity_id:
                dropped += 1
            else:
                merges[entity_id] = target
    for row in _rows(answer, "themes"):
        theme_id = themes.get(str(row.get("id"))) if isinstance(row, dict) else None
        label = _label(row.get("label")) if isinstance(row, dict) else None
        if theme_id is None or label is None:
            dropped += 1
            continue
        labels[theme_id] = label
    if not (types or merges or labels):
        raise ValueError("the reply named no listed entity or theme usably")
    return Normalisation(types, merges, labels, dropped)


def _roots(merges: Mapping[str, str], mentions: Mapping[str, int]) -> dict[str, str]:
    """Each entity's group root: the group's most mentioned entity, on a tie the one ``same_as`` names
    (chains and cycles joined)."""
    parent = {e: e for e in mentions}

    def find(e: str) -> str:
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    for a, b in merges.items():
        ra, rb = find(a), find(b)
        if ra != rb:
            keep, other = (ra, rb) if mentions[ra] > mentions[rb] else (rb, ra)  # a tie: the one named
            parent[other] = keep
    return {e: find(e) for e in mentions}


def _joined(values: Sequence[Sequence[str]], limit: int) -> tuple[str, ...]:
    out: list[str] = []
    for group in values:
        out.extend(v for v in group if v not in out)
    return tuple(out[:limit])


def _merged_entities(entities: Sequence[Entity], root: Mapping[str, str]) -> tuple[Entity, ...]:
    groups: dict[str, list[Entity]] = {}
    for e in entities:
        groups.setdefault(root[e.entity_id], []).append(e)
    out = []
    for e in entities:
        if root[e.entity_id] != e.entity_id:
            continue
        members = [e, *(m for m in groups[e.entity_id] if m is not e)]
        out.append(
            dataclasses.replace(
                e,
                aliases=_joined([m.aliases for m in members], _MAX_ALIASES),
                mentions=sum(m.mentions for m in members),
                chapter_ids=_joined([m.chapter_ids for m in members], _MAX_CHAPTERS),
                entity_type=e.entity_type or next((m.entity_type for m in members if m.entity_type), ""),
            )
        )
    return tuple(out)


def _repointed_events(
    events: Sequence[Event], root: Mapping[str, str], names: Mapping[str, str]
) -> tuple[Event, ...]:
    """Events with merged participants re-pointed; a pair that became one entity is dropped, and two
    events that became one pair are joined (weights added, chapters joined)."""
    joined: dict[tuple[str, ...], Event] = {}
    for ev in events:
        pair = tuple(dict.fromkeys(root.get(p, p) for p in ev.participants))
        if len(pair) < 2:
            continue
        label = "Encounter: " + " + ".join(names.get(p, p) for p in pair)
        if pair in joined:
            first = joined[pair]
            chapters = _joined([first.chapter_ids, ev.chapter_ids], _MAX_CHAPTERS)
            joined[pair] = dataclasses.replace(first, weight=first.weight + ev.weight, chapter_ids=chapters)
        else:
            joined[pair] = dataclasses.replace(ev, participants=pair, label=label)
    return tuple(sorted(joined.values(), key=lambda ev: -ev.weight))  # stable: first seen first on ties


def normalised_concept_map(cmap: ConceptMap, normalisation: Normalisation) -> ConceptMap:
    """``cmap`` with the reply's types, merges and labels applied, and a note of what was done."""
    typed = [
        dataclasses.replace(e, entity_type=normalisation.types.get(e.entity_id, e.entity_type))
        for e in cmap.entities
    ]
    root = _roots(normalisation.merges, {e.entity_id: e.mentions for e in typed})
    entities = _merged_entities(typed, root)
    names = {e.entity_id: e.name for e in entities}
    themes = tuple(
        dataclasses.replace(t, label=normalisation.labels.get(t.theme_id, t.label)) for t in cmap.themes
    )
    merged = len(cmap.entities) - len(entities)
    note = (
        f"concept map normalised by the LLM: {len(normalisation.types)} entity types, "
        f"{merged} alias merge(s), {len(normalisation.labels)} theme labels"
        + (f"; {normalisation.dropped} unusable reply row(s) dropped" if normalisation.dropped else "")
    )
    return dataclasses.replace(
        cmap,
        entities=entities,
        themes=themes,
        events=_repointed_events(cmap.events, root, names),
        notes=(*cmap.notes, note),
    )


def kept_deterministic(cmap: ConceptMap, reason: str) -> ConceptMap:
    """``cmap`` as it is, with a note that the LLM's normalisation failed and why."""
    note = f"concept map not normalised by the LLM ({reason}): the deterministic map is kept"
    return dataclasses.replace(cmap, notes=(*cmap.notes, note))
