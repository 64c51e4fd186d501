"""The book tools as OpenAI tool definitions: each tool's name, description and JSON parameters
(``TOOL_SPECS``, ``tool_definitions``), and a hit as a tool result row (``hit_row``). ``BookTools``
(``nodes.backends.book_tools``) runs them.

Config: none. Limitations: the descriptions are what a model reads to choose a tool; changing them
changes the agent's choices.
"""

from __future__ import annotations

from typing import Any

from folio.nodes.core.types import Hit


def location_id(hit: Hit) -> str:
    """A hit's location id: ``BOOK_ID/CHUNK_ID`` (``chunk_get``'s argument)."""
    return f"{hit.book_id}/{hit.chunk_id}"


def hit_row(hit: Hit, max_chars: int = 600) -> dict[str, Any]:
    """A hit as a tool result row, its text cut to ``max_chars``."""
    return {
        "location_id": location_id(hit),
        "book_id": hit.book_id,
        "chapter_id": hit.chapter_id,
        "chapter_title": hit.chapter_title,
        "start": hit.start,
        "end": hit.end,
        "score": round(hit.score, 4),
        "text": hit.text if len(hit.text) <= max_chars else hit.text[:max_chars] + "…",
    }


_SCOPE = {
    "type": "array",
    "items": {"type": "string"},
    "description": "chapter ids to search; empty for the whole books in play",
}
TOOL_SPECS: tuple[tuple[str, str, dict[str, Any], tuple[str, ...]], ...] = (
    (
        "book_concept_map_lookup",
        "Look up entities, themes and events of the books' concept maps; returns candidate chapter ids.",
        {"query": {"type": "string"}},
        ("query",),
    ),
    (
        "chapter_summary_get",
        "A summary of one chapter.",
        {"chapter_id": {"type": "string"}},
        ("chapter_id",),
    ),
    (
        "search",
        "Search by words and meaning together (the ranking of `folio search`): excerpts with their "
        "locations. The best first search for most questions.",
        {"query": {"type": "string"}, "scope": _SCOPE, "k": {"type": "integer", "minimum": 1, "maximum": 20}},
        ("query",),
    ),
    (
        "text_search",
        "Exact-word search (bm25): excerpts with their locations. Best for names, quotes and concrete facts.",
        {"query": {"type": "string"}, "scope": _SCOPE},
        ("query",),
    ),
    (
        "semantic_search",
        "Search by meaning: chunks with their locations. Best for abstract or conceptual questions.",
        {"query": {"type": "string"}, "scope": _SCOPE, "k": {"type": "integer", "minimum": 1, "maximum": 20}},
        ("query",),
    ),
    (
        "chunk_get",
        "The full text of one chunk, by its location_id.",
        {"location_id": {"type": "string"}},
        ("location_id",),
    ),
    ("book_synopsis_get", "A synthesis of a whole book.", {"book_id": {"type": "string"}}, ()),
)


def tool_definitions() -> list[dict[str, Any]]:
    """OpenAI tool definitions (``tools=`` of a chat request) of every book tool."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": list(required),
                    "additionalProperties": False,
                },
            },
        }
        for name, description, properties, required in TOOL_SPECS
    ]
