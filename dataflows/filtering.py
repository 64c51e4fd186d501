"""Book filters by metadata: ``--author``, ``--series``, ``--tag``, ``--language``, ``--format``.

One ``BookFilter`` restricts ``folio books``, ``search`` and ``ask`` (and the same parameters of the HTTP
API and the MCP tools) to the books whose descriptor matches every field given:

- author: a name of the book's authors contains the words given (case and accents ignored: "doyle",
  "Conan Doyle", "gonçalves" and "goncalves" match);
- series: the series name contains the words given;
- tag: one of the book's tags equals the tag given (case and accents ignored);
- language: the book's language, with ISO 639-2 codes taken as their ISO 639-1 twin ("eng" = "en",
  "en-GB" = "en");
- format: the format of the file ingested ("epub", "txt", ...).

Limitations: no boolean expressions (one value per field, all fields must match); a language code
outside the small table below is compared as written.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from folio.nodes.core.types import FolioError

FILTER_FIELDS = ("author", "series", "tag", "language", "format")
ISO_639_2 = {
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it", "por": "pt",
    "nld": "nl", "dut": "nl", "rus": "ru", "pol": "pl", "nob": "nb", "nno": "nn", "nor": "no", "swe": "sv",
    "dan": "da", "fin": "fi", "jpn": "ja", "zho": "zh", "chi": "zh", "lat": "la", "ell": "el", "gre": "el",
    "ces": "cs", "cze": "cs", "hun": "hu", "tur": "tr", "ara": "ar", "heb": "he", "kor": "ko", "ukr": "uk",
}  # fmt: skip


def folded(text: str) -> str:
    """``text`` lower-cased with accents removed and whitespace collapsed."""
    decomposed = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).lower().split())


def language_code(text: str) -> str:
    """A language tag's primary code, ISO 639-2 mapped to ISO 639-1 where the table knows it."""
    primary = text.strip().lower().replace("_", "-").split("-")[0]
    return ISO_639_2.get(primary, primary)


@dataclass(frozen=True)
class BookFilter:
    """The metadata a book must match (``None``: any)."""

    author: str | None = None
    series: str | None = None
    tag: str | None = None
    language: str | None = None
    format: str | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any] | Any) -> BookFilter:
        """From a mapping or an object with the fields as attributes (argparse's namespace)."""
        get = values.get if isinstance(values, Mapping) else lambda k: getattr(values, k, None)
        out = {}
        for name in FILTER_FIELDS:
            value = get(name)
            if value is not None and not isinstance(value, str):
                raise FolioError(name, f"a filter is one text value (got {value!r})")
            if value is not None and value.strip():
                out[name] = value.strip()
        return cls(**out)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def describe(self) -> str:
        return ", ".join(
            f"--{f.name} {getattr(self, f.name)!r}" for f in fields(self) if getattr(self, f.name)
        )

    def matches(self, book: Mapping[str, Any]) -> bool:
        """True when the descriptor (or ``folio books`` row) ``book`` matches every field given."""
        authors = book.get("authors") or [book.get("author") or ""]
        checks = (
            (self.author, lambda v: any(folded(v) in folded(str(a)) for a in authors)),
            (self.series, lambda v: folded(v) in folded(str(book.get("series") or ""))),
            (self.tag, lambda v: folded(v) in {folded(str(t)) for t in book.get("tags") or ()}),
            (self.language, lambda v: language_code(v) == language_code(str(book.get("language") or ""))),
            (self.format, lambda v: v.lower().lstrip(".") == str(book.get("format") or "").lower()),
        )
        return all(value is None or test(value) for value, test in checks)


def matching_ids(books: Iterable[Mapping[str, Any]], book_filter: BookFilter) -> list[str]:
    """The ids of ``books`` that match; a filter that matches none is one line naming it."""
    books = list(books)
    ids = [str(b["book_id"]) for b in books if book_filter.matches(b)]
    if book_filter and not ids:
        raise FolioError(book_filter.describe(), f"no book of the {len(books)} in the library matches")
    return ids


def book_line(row: Mapping[str, Any]) -> str:
    """A ``folio books`` row's text: title — authors [series #n; tags; language, format]."""
    extra = []
    if row.get("series"):
        index = row.get("series_index")
        extra.append(f"{row['series']} #{index:g}" if isinstance(index, int | float) else str(row["series"]))
    if row.get("tags"):
        extra.append(", ".join(map(str, row["tags"])))
    extra.append(", ".join(str(v) for v in (row.get("language"), row.get("format")) if v))
    return f"{row['title']} — {row['author']} [{'; '.join(e for e in extra if e)}]"
