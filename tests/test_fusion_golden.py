"""The design's cross-source fusion tests as one golden table, run through the real nodes.

Every row gives the results the sources return (the book flow's and Kiwix's as they come, web/news as
jobs in the real fusion pool with a delay) and the exact fused text, the sources kept and the notes
expected from ``source_results`` → ``fused_context`` (``nodes/query/source_fusion.py``): the empty filter,
zero / one / several paths, the 60 % de-duplication, truncation, headers, ``---`` separators, a
question decomposed into clauses whose results merge, and one slow source abandoned at the timeout
while the others' results stand.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from folio.nodes.backends.book_tools import PendingJobs, shared_pool
from folio.nodes.core.types import Citation, SourceResult
from folio.nodes.query.routing import question_clauses
from folio.nodes.query.source_fusion import NO_RESULTS, fused_context, source_results

WHALE = "The sperm whale dives deep. It hunts giant squid in the dark. Its head holds spermaceti oil."
WHALE_SHORT = "The sperm whale dives very deep. It hunts the giant squid in the dark."
NEON = "Neon is a noble gas. Its atomic number is ten. It glows red in lamps."
TARTS = "The Knave of Hearts stole the tarts."
TRIAL = "The King of Hearts held the trial in his court."
TARTS_AGAIN = "And the Knave of Hearts, he stole those tarts!"
BEATLES = "The Beatles stopped touring in 1966 because the concerts had become untenable."
QUESTION = "Why did the Beatles stop touring? Who stole the tarts?"
CLAUSES = question_clauses(QUESTION)  # decomposition: ("Why did the Beatles …", "Who stole the tarts")


def r(source: str, text: str, label: str = "", clause: str = "q") -> SourceResult:
    return SourceResult(
        source, label or source, text, (Citation(source, title=label or source),), clause=clause
    )


@dataclass(frozen=True)
class Row:
    name: str
    book: tuple[SourceResult, ...] = ()
    kiwix: tuple[SourceResult, ...] = ()
    jobs: tuple[tuple[str, str, float, SourceResult | None], ...] = ()  # (source, clause, delay, result)
    max_chars: int = 1500
    text: str = ""
    kept: tuple[str, ...] = ()  # the labels of the sections kept, in order
    notes: tuple[str, ...] = field(default=())


ROWS = (
    Row("zero paths", text=NO_RESULTS),
    Row(
        "empty filter: blank, 'no results' and a failed source leave nothing",
        kiwix=(r("kiwix", "No results found for neon."),),
        jobs=(("web", "q", 0.0, r("web", "   ")), ("news", "q", 0.0, None)),
        text=NO_RESULTS,
        notes=("news: RuntimeError: down",),
    ),
    Row(
        "empty filter keeps a real result that begins like an empty phrase",
        kiwix=(r("kiwix", "No resultant force acts on a body at rest.", "Force"),),
        text="No resultant force acts on a body at rest.",
        kept=("Force",),
    ),
    Row("one path: its text as is, no header", kiwix=(r("kiwix", NEON, "Neon"),), text=NEON, kept=("Neon",)),
    Row(
        "two paths: headers, --- and the configured source order",
        kiwix=(r("kiwix", WHALE, "Sperm whale"),),
        jobs=(("web", "q", 0.0, r("web", NEON, "Neon")),),
        text=f"[KIWIX — Sperm whale]\n{WHALE}\n\n---\n\n[WEB — Neon]\n{NEON}",
        kept=("Sperm whale", "Neon"),
    ),
    Row(
        "three paths, a header without a repeated label",
        book=(r("book", TARTS, "Alice"),),
        kiwix=(r("kiwix", WHALE, "kiwix"),),
        jobs=(("news", "q", 0.0, r("news", NEON, "Neon")),),
        text=f"[BOOK — Alice]\n{TARTS}\n\n---\n\n[KIWIX]\n{WHALE}\n\n---\n\n[NEWS — Neon]\n{NEON}",
        kept=("Alice", "kiwix", "Neon"),
    ),
    Row(
        "60 % de-duplication: the result with fewer sentences goes, with a note",
        kiwix=(r("kiwix", WHALE, "Sperm whale"),),
        jobs=(("web", "q", 0.0, r("web", WHALE_SHORT, "Whales")),),
        text=WHALE,
        kept=("Sperm whale",),
        notes=("web: dropped as a duplicate of another source",),
    ),
    Row(
        "60 % de-duplication runs before the merge: the longer Kiwix article beats one web clause",
        kiwix=(r("kiwix", f"{WHALE} It can live for seventy years.", "Sperm whale", CLAUSES[0]),),
        jobs=(
            ("web", CLAUSES[0], 0.0, r("web", WHALE, "Whales", CLAUSES[0])),
            ("web", CLAUSES[1], 0.0, r("web", NEON, "Neon", CLAUSES[1])),
        ),
        text=f"[KIWIX — Sperm whale]\n{WHALE} It can live for seventy years.\n\n---\n\n[WEB — Neon]\n{NEON}",
        kept=("Sperm whale", "Neon"),
        notes=("web: dropped as a duplicate of another source",),
    ),
    Row(
        "truncation: each section cut to its share at a word boundary",
        kiwix=(r("kiwix", WHALE, "Sperm whale"),),
        jobs=(("web", "q", 0.0, r("web", NEON, "Neon")),),
        max_chars=40,
        text="[KIWIX — Sperm whale]\nThe sperm whale dives deep. It hunts\n\n---\n\n"
        "[WEB — Neon]\nNeon is a noble gas. Its atomic number",
        kept=("Sperm whale", "Neon"),
    ),
    Row(
        "decomposition: each clause to its source, the book's refusal a note when another answers",
        book=(r("book", "I could not find support for this in the books.", "books", CLAUSES[0]),),
        kiwix=(r("kiwix", BEATLES, "The Beatles", CLAUSES[0]),),
        text=BEATLES,
        kept=("The Beatles",),
        notes=(f'book: "{CLAUSES[0]}": I could not find support for this in the books.',),
    ),
    Row(
        "merge: one source's clauses are one section, items in the question's order between ---",
        jobs=(
            ("web", CLAUSES[0], 0.0, r("web", f"{BEATLES}\n{TARTS_AGAIN}", "Beatles", CLAUSES[0])),
            ("web", CLAUSES[1], 0.0, r("web", f"{TARTS}\n{TRIAL}", "Tarts", CLAUSES[1])),
            ("news", CLAUSES[0], 0.0, r("news", NEON, "Neon", CLAUSES[0])),
        ),
        # not alphabetical ("Who …" < "Why …"); the second item's line about the tarts says the first's
        # in other words, so it is kept once
        text=f"[WEB — Beatles + Tarts]\n{BEATLES}\n{TARTS_AGAIN}\n---\n{TRIAL}"
        f"\n\n---\n\n[NEWS — Neon]\n{NEON}",
        kept=("Beatles + Tarts", "Neon"),
    ),
    Row(
        "concurrency: the slow source is abandoned at the timeout, the others stand",
        book=(r("book", TARTS, "Alice"),),
        jobs=(("web", "q", 3.0, r("web", WHALE, "late")), ("news", "q", 0.0, r("news", NEON, "Neon"))),
        text=f"[BOOK — Alice]\n{TARTS}\n\n---\n\n[NEWS — Neon]\n{NEON}",
        kept=("Alice", "Neon"),
        notes=("web: timed out after 0.5 s",),
    ),
)


def _job(delay: float, result: SourceResult | None):
    def run(clause: str) -> SourceResult:
        time.sleep(delay)
        if result is None:
            raise RuntimeError("down")
        return result

    return run


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_fusion_golden_table(row: Row) -> None:
    pending = PendingJobs(shared_pool(12), [(s, c, _job(d, res)) for s, c, d, res in row.jobs])
    t0 = time.monotonic()
    results = source_results(pending, row.book, row.kiwix, fusion_timeout_seconds=0.5)
    assert time.monotonic() - t0 < 2.0  # never waits for the slow source
    fused = fused_context(results, fusion_max_chars_per_source=row.max_chars)
    assert fused.text == row.text
    assert tuple(k.label for k in fused.results) == row.kept
    assert fused.notes == row.notes
