"""Kiwix query stage: turn a question into searches, pick the books, pool the candidates.

The engine's full-text search ANDs every term, so a raw question finds nothing. This stage cleans the
question into search terms (stop words, possessives, punctuation dropped), searches every book with a
ladder of queries, and pools the results (de-duplicated by book and path) for ``nodes/kiwix/scoring.py``:

1. the full cleaned terms; when they find ``FULL_QUERY_MIN_HITS`` (3) or more articles, that is the
   book's pool (fewer means one term the answer does not use may be holding the AND back);
2. otherwise relaxation too, in tiers (a tier runs only when the ones before found nothing). Each term
   is searched alone to learn how common it is; the full query is retried with the most common terms
   dropped one by one (down to two terms); then every adjacent pair of terms is searched as a key
   phrase (a pair found in ``SEARCH_LIMIT`` or more articles, such as the book's own subject, is
   ignored); then, for questions of one or two terms only, the two rarest single terms;
3. with relaxation, title suggestions for named things: runs of capitalised words in the question
   ("Hoover Dam", "Apollo 13"; ignored when they title ``SEARCH_LIMIT`` or more articles); a one-word
   query also suggests its stem ("emus" -> "emu").

Every pooled candidate's excerpt is then rebuilt for the query: its lead excerpt, followed by the
passage of its article that holds the most query words when that passage lies outside the lead
("lead … passage"), so excerpt overlap sees whether the article holds what was asked, not only how
it begins. Articles are read through the backends' page caches (no extra request for a candidate).

Editions: books whose names differ only by flavour and date (``wikipedia_en_ray_charles_mini_2020-03``
and ``..._novid_2018-10``) are editions of one Kiwix book; only the newest is searched, the older ones
are reported by ``superseded_books`` (else every shared article is ranked, selected and fused twice),
unless the newest finds nothing, fails, or is damaged: then its older editions are, newest first, until
one finds something (a "mini" edition holds each article's lead only: "Who was Ray Charles married to?"
is answered from the 2018 "novid" edition, which the 2020 "mini" one superseded; a damaged copy, whose
search lists articles it cannot read, must not hide an intact older edition, which then adds only the
articles the damaged one could not give).

Which books are searched (``searched_books``): up to ``kiwix_search_all_max`` (8) archives, every one
(its evidence then selects); with more, the catalogue chooses ``kiwix_max_books`` archives *before* any
search, as the design has it (``_catalogue_score``: ``CATALOGUE_WORD`` per question stem in the
archive's title, description or name, log10 of its article count, ``CATALOGUE_WIKIPEDIA`` for a
Wikipedia, minus ``CATALOGUE_LANGUAGE`` for a non-English one), and only those are searched.
Difference from the design, measured (2026-11-26, Kiwix questions, dev 58 / held-out 43, top-1 / top-5,
``--no-answers``, machine loaded by ~9 engineers): with the 5 sample archives, searching all gives
0.862 / 0.948 and 0.861 / 0.930 at 39-42 searches a question; the catalogue choosing 2 first gives
0.810 / 0.862 and 0.814 / 0.884 at 19 (a catalogue says "Wikipedia 100", not which 100 articles), so few
archives are all searched. With 50 archives (the 5, ten copies each) the catalogue choice searches 2
of them: 21 searches a question (first 5 dev questions), where searching all costs 467
(``tests/test_kiwix_selection.py``).
The LLM does not choose before the search (it ranks the searched books, below).

Book selection: with ``llm: none`` the books are ranked by their best scored candidate (evidence);
with ``llm: openai`` the LLM ranks the searched books (JSON) and unknown names are dropped, falling
back to the evidence rule when nothing valid remains. Up to ``kiwix_max_books`` books; the first is
primary.

The backend (open ZIM archives, or a kiwix-serve client) is built by ``kiwix_backend`` from the
settings, or created once per process by the caller and handed to the DAG (Hamilton ``overrides``).
The LLM is ``llm_client`` (``nodes/query/llm_connection.py``), the query graph's one client.

Config keys: ``kiwix`` (libzim | http; ``none`` leaves this module out of the ask graph), ``zim_paths``,
``kiwix_url``, ``kiwix_timeout_seconds``, ``kiwix_max_books``, ``kiwix_search_all_max``, ``llm`` (none |
openai).
Input: ``kiwix_query`` (the question; in the ask graph, the clauses routed away from the books,
see ``nodes/query/source_fusion.py``).
Limitations: English stop words only; "rarity" is the engine's hit count capped at ``PROBE_LIMIT``;
relaxation looks at the first 8 terms only; a book's own subject words ("ray charles" in the Ray
Charles archive) still earn title points everywhere in that book, so an article whose title lacks
them ("Ray (film)") loses to ones that have them; editions are recognised by name only.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from hamilton.function_modifiers import config

from folio.nodes.backends.html_text import best_passage as _best_passage  # kept here for its tests
from folio.nodes.core.kiwix_types import BookSearch, Candidate, KiwixBook, KiwixCatalog
from folio.nodes.core.ranking import rank_candidates
from folio.nodes.core.text import (
    QUESTION_STOPWORDS,
    named_phrases,
    plural_stem,
    strip_possessives,
    words,
)
from folio.nodes.core.types import FolioError

logger = logging.getLogger(__name__)

SEARCH_LIMIT = 20
PROBE_LIMIT = 60  # single-term probes: how common a term is, capped here
_MAX_RELAX_TERMS = 8  # relaxation (single-term probes, pairs) looks at the first 8 terms only
FULL_QUERY_MIN_HITS = 3  # a full query that finds fewer articles is over-constrained: relax it too
CATALOGUE_WORD = 3.0  # catalogue choice: per question stem in an archive's title, description or name
CATALOGUE_WIKIPEDIA = 1.0  # catalogue choice: a Wikipedia answers general questions
CATALOGUE_LANGUAGE = 5.0  # catalogue choice: an archive not in English
_EDITION_RE = re.compile(r"^(?P<base>.+?)(?:_(?:maxi|mini|nopic|novid|nodet|all))?_(?P<date>\d{4}-\d{2})$")


# --- pure helpers ----------------------------------------------------------------------------------


def _clean_terms(question: str) -> tuple[str, ...]:
    """Search terms of a question: lower case, no possessives, punctuation or stop words, no repeats.

    Falls back to every word when the question is nothing but stop words ("What is it?").
    """
    found = words(strip_possessives(question))
    terms = [w for w in found if w not in QUESTION_STOPWORDS] or found
    return tuple(dict.fromkeys(terms))


def _suggest_terms(question: str, terms: Sequence[str]) -> tuple[str, ...]:
    """Title-suggestion inputs: the named phrases of the question; for a one-word query, that word's stem."""
    single = [plural_stem(terms[0])] if len(terms) == 1 else []
    return tuple(dict.fromkeys([*named_phrases(question), *single]))


def _weakest_first(terms: Sequence[str], hit_counts: dict[str, int]) -> list[str]:
    """Terms ordered from weakest (most hits, then shortest) to strongest."""
    return sorted(terms, key=lambda t: (-hit_counts.get(t, 0), len(t), terms.index(t)))


def _relaxed_queries(terms: Sequence[str], hit_counts: dict[str, int]) -> list[str]:
    """The full query with the weakest terms dropped one at a time, down to two terms."""
    order = _weakest_first(terms, hit_counts)
    queries = []
    for k in range(1, len(terms) - 1):
        dropped = set(order[:k])
        queries.append(" ".join(t for t in terms if t not in dropped))
    return queries


def _key_phrases(terms: Sequence[str]) -> list[str]:
    """Adjacent term pairs, in question order."""
    return [f"{a} {b}" for a, b in itertools.pairwise(terms)]


def _rarest_terms(terms: Sequence[str], hit_counts: dict[str, int], n: int = 2) -> list[str]:
    """The ``n`` rarest terms that the book contains at all (fewest hits, then longest)."""
    present = [t for t in terms if hit_counts.get(t, 0) > 0]
    return sorted(present, key=lambda t: (hit_counts[t], -len(t), terms.index(t)))[:n]


def _query_excerpt(lead: str, text: str, terms: Sequence[str]) -> str:
    """The excerpt scoring sees: the lead excerpt, then the article's passage that best matches the
    query when that passage does not start inside the lead ("lead … passage").

    The lead says what the article is about, the passage whether it holds what was asked; excerpt
    overlap (a density) then rewards articles where both match the query.
    """
    if not text:
        return lead
    _, passage = _best_passage(text, terms)
    head = " ".join(passage.split()[:8])
    if not passage or head in " ".join(lead.split()):
        return lead
    return f"{lead} … {passage}" if lead else passage


def _with_passages(backend: Any, cands: Iterable[Candidate], terms: Sequence[str]) -> tuple[Candidate, ...]:
    """Candidates whose excerpt is ``_query_excerpt`` of their article (read through the backend's
    page cache); a candidate whose article cannot be read keeps the excerpt it came with."""
    out = []
    for cand in cands:
        try:
            text = backend.article(cand.book, cand.path).text
        except FolioError:
            out.append(cand)
            continue
        excerpt = _query_excerpt(cand.excerpt, text, terms)
        out.append(Candidate(cand.book, cand.path, cand.title, excerpt, cand.url, cand.origin))
    return tuple(out)


def _edition(book: str) -> tuple[str, str] | None:
    """(base name, date) of a Kiwix book name: the flavour and the date stripped from the base.

    "wikipedia_en_ray_charles_mini_2020-03" -> ("wikipedia_en_ray_charles", "2020-03"); None for a
    name without an edition date.
    """
    found = _EDITION_RE.match(book)
    return (found.group("base"), found.group("date")) if found else None


def _newest_editions(books: Sequence[KiwixBook]) -> tuple[tuple[KiwixBook, ...], tuple[tuple[str, str], ...]]:
    """The books minus older editions of a book that is also present, and (older, newer) name pairs.

    Two editions of one Kiwix book (same name once flavour and date are stripped) hold copies of the
    same articles; searching both would rank, select and fuse every article twice. Among editions of
    the same date (two flavours), the first listed is kept.
    """
    newest: dict[str, tuple[str, str]] = {}  # base name -> (date, book name)
    for book in books:
        edition = _edition(book.name)
        if edition and (edition[0] not in newest or edition[1] > newest[edition[0]][0]):
            newest[edition[0]] = (edition[1], book.name)
    kept, superseded = [], []
    for book in books:
        edition = _edition(book.name)
        newer = newest[edition[0]][1] if edition else book.name
        if newer == book.name:
            kept.append(book)
        else:
            superseded.append((book.name, newer))
    return tuple(kept), tuple(superseded)


def _plural_stems(text: str) -> frozenset[str]:
    return frozenset(plural_stem(w) for w in words(text))


def _catalogue_score(book: KiwixBook, question_stems: frozenset[str]) -> float:
    """How well the catalogue says ``book`` fits a question: ``CATALOGUE_WORD`` per question stem in its
    title, description or name, plus the size prior (log10 of its article count; an encyclopedia answers
    more) and ``CATALOGUE_WIKIPEDIA`` for a Wikipedia; an archive in another language than English
    loses ``CATALOGUE_LANGUAGE`` (the question words, stop words and stems are English)."""
    described = _plural_stems(f"{book.title} {book.description} {book.name.replace('_', ' ')}")
    score = CATALOGUE_WORD * len(question_stems & described) + math.log10(1 + max(0, book.article_count))
    if book.is_wikipedia:
        score += CATALOGUE_WIKIPEDIA
    if book.language and book.language.lower()[:2] != "en":
        score -= CATALOGUE_LANGUAGE
    return score


def _catalogue_choice(books: Sequence[KiwixBook], question: str, limit: int) -> tuple[KiwixBook, ...]:
    """The ``limit`` books the catalogue ranks best for ``question`` (ties: the order given)."""
    question_stems = _plural_stems(" ".join(_clean_terms(question)))
    order = sorted(range(len(books)), key=lambda i: (-_catalogue_score(books[i], question_stems), i))
    return tuple(books[i] for i in sorted(order[: max(1, limit)]))


def _pool(groups: Iterable[Iterable[Candidate]]) -> tuple[Candidate, ...]:
    """Candidates in discovery order, the first occurrence of each (book, path) kept."""
    seen: set[tuple[str, str]] = set()
    pooled: list[Candidate] = []
    for group in groups:
        for cand in group:
            key = (cand.book, cand.path)
            if key not in seen:
                seen.add(key)
                pooled.append(cand)
    return tuple(pooled)


def _with_origin(cands: Iterable[Candidate], origin: str) -> list[Candidate]:
    return [c if c.origin == origin else _replace_origin(c, origin) for c in cands]


def _replace_origin(cand: Candidate, origin: str) -> Candidate:
    return Candidate(cand.book, cand.path, cand.title, cand.excerpt, cand.url, origin)


def _search_book(backend: Any, book: str, terms: Sequence[str], suggest_inputs: Sequence[str]) -> BookSearch:
    """Run the search ladder on one book; a backend failure becomes the book's error."""
    try:
        groups: list[list[Candidate]] = []
        if terms:
            full = list(backend.search(book, " ".join(terms), SEARCH_LIMIT))
            groups.append(_with_origin(full, "search"))
            if len(full) >= FULL_QUERY_MIN_HITS:
                return BookSearch(book, _with_passages(backend, _pool(groups), terms))
            groups.extend(_relaxation(backend, book, list(terms)[:_MAX_RELAX_TERMS]))
        for phrase in suggest_inputs:
            suggested = backend.suggest(book, phrase, SEARCH_LIMIT)
            if len(suggested) < SEARCH_LIMIT:  # a name that titles everything does not discriminate
                groups.append(_with_origin(suggested, "suggest"))
        return BookSearch(book, _with_passages(backend, _pool(groups), terms))
    except FolioError as exc:
        return BookSearch(book, (), exc.reason)


def _relaxation(backend: Any, book: str, terms: list[str]) -> list[list[Candidate]]:
    """Relaxed searches for a book where the full query found too little, strongest tier first.

    Tiers: the query with its weakest terms dropped (the first level that finds anything); else the
    discriminating key phrases (adjacent pairs). A question of one or two terms has no such tiers and
    uses its rarest single terms instead; a single word of a longer question is too weak to stand for
    it, so a book where only single words match contributes nothing.
    """
    singles = {t: list(backend.search(book, t, PROBE_LIMIT)) for t in terms}
    counts = {t: len(hits) for t, hits in singles.items()}
    if len(terms) <= 2:
        return [_with_origin(singles[t][:SEARCH_LIMIT], "term") for t in _rarest_terms(terms, counts)]
    for query in _relaxed_queries(terms, counts):
        found = list(backend.search(book, query, SEARCH_LIMIT))
        if found:
            return [_with_origin(found, "relaxed")]
    found_by_phrase = [backend.search(book, p, SEARCH_LIMIT) for p in _key_phrases(terms)]
    # a pair found everywhere (the book's own subject, "ray charles") does not discriminate
    return [_with_origin(f, "phrase") for f in found_by_phrase if 0 < len(f) < SEARCH_LIMIT]


def _evidence_ranking(
    searches: Sequence[BookSearch], terms: tuple[str, ...], question: str
) -> tuple[tuple[str, float], ...]:
    """Books ranked by their best scored candidate (no primary bonus); books with nothing are left out."""
    ranked = []
    for order, found in enumerate(searches):
        if found.candidates:
            best = rank_candidates(found.candidates, terms, question, "")[0].score
            ranked.append((found.book, best, order))
    ranked.sort(key=lambda r: (-r[1], r[2]))
    return tuple((book, score) for book, score, _ in ranked)


def _valid_llm_books(answer: dict[str, Any], known: Sequence[str], limit: int) -> tuple[str, ...]:
    """Book names from an LLM answer ``{"books": [...]}``: known names only, no repeats, at most ``limit``."""
    names = answer.get("books") if isinstance(answer, dict) else None
    if not isinstance(names, list):
        return ()
    valid = [n.strip() for n in names if isinstance(n, str) and n.strip() in known]
    return tuple(dict.fromkeys(valid))[:limit]


def _book_ranking_messages(question: str, books: Sequence[KiwixBook]) -> list[dict[str, str]]:
    listing = "\n".join(f"- {b.name}: {b.title}. {b.description}" for b in books)
    return [
        {
            "role": "system",
            "content": "You pick which offline archives can answer a question. Reply with JSON "
            '{"books": [names, best first]} using only names from the list.',
        },
        {"role": "user", "content": f"Question: {question}\nArchives:\n{listing}"},
    ]


BOOK_RANKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"books": {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 8}},
    "required": ["books"],
}


# --- nodes -----------------------------------------------------------------------------------------


@config.when(kiwix="libzim")
def kiwix_backend__libzim(zim_paths: Sequence[str] = ()) -> Any:
    """The embedded libzim backend over the given ZIM files (not cached: it holds open archives)."""
    from folio.nodes.backends.zim import ZimBackend

    return ZimBackend([str(p) for p in zim_paths])


@config.when(kiwix="http")
def kiwix_backend__http(kiwix_url: str | None = None, kiwix_timeout_seconds: float | int = 10.0) -> Any:
    """A kiwix-serve backend (not cached: it holds an HTTP client)."""
    from folio.nodes.backends.kiwix_http import KiwixHttpBackend

    if not kiwix_url:
        raise FolioError("kiwix_url", "kiwix: http needs kiwix_url (the base URL of a kiwix-serve)")
    return KiwixHttpBackend(kiwix_url, float(kiwix_timeout_seconds))


def kiwix_catalog(kiwix_backend: Any) -> KiwixCatalog:
    """Every book the backend could open; a backend that cannot list its books (a kiwix-serve that is
    down or is not a kiwix-serve) offers none and says why, so the other sources still answer."""
    try:
        books = tuple(kiwix_backend.books())
    except FolioError as exc:
        return KiwixCatalog((), (exc.source, exc.reason))
    return KiwixCatalog(books, _none_opened(books, getattr(kiwix_backend, "errors", {})))


def _none_opened(books: tuple[KiwixBook, ...], errors: dict[str, FolioError]) -> tuple[str, str] | None:
    """Why no archive opened (the first one's error, naming its file), when none did; else None."""
    if books or not errors:
        return None
    first = next(iter(errors.values()))
    more = f" (and {len(errors) - 1} more archive(s) did not open)" if len(errors) > 1 else ""
    return (first.source, first.reason + more)


def search_terms(kiwix_query: str) -> str:
    """The cleaned search terms of the question, space-separated ("beatles stop touring")."""
    return " ".join(_clean_terms(kiwix_query))


def searched_books(
    kiwix_catalog: KiwixCatalog,
    kiwix_query: str,
    kiwix_max_books: int = 2,
    kiwix_search_all_max: int = 8,
) -> tuple[KiwixBook, ...]:
    """The books searched, older editions left out: all of them up to ``kiwix_search_all_max``
    archives (evidence then picks); beyond that the ``kiwix_max_books`` the catalogue ranks best,
    chosen before any search."""
    available = _newest_editions(kiwix_catalog.books)[0]
    if len(available) <= int(kiwix_search_all_max):
        return available
    return _catalogue_choice(available, kiwix_query, int(kiwix_max_books))


def superseded_books(kiwix_catalog: KiwixCatalog) -> tuple[tuple[str, str], ...]:
    """(older edition, newer edition) for every book left out of the search as superseded."""
    return _newest_editions(kiwix_catalog.books)[1]


def book_searches(
    kiwix_backend: Any,
    searched_books: tuple[KiwixBook, ...],
    superseded_books: tuple[tuple[str, str], ...],
    search_terms: str,
    kiwix_query: str,
) -> tuple[BookSearch, ...]:
    """The search ladder run on every available book; where a book finds nothing, fails (its error is
    kept), or is damaged (an article its search met could not be read: ``kiwix_backend.damaged``), on its
    older editions, newest first, until one finds something: a newer "mini" edition holds only each
    article's lead, and a damaged copy must not hide an intact older one. Beside a damaged edition, an
    older one adds only the articles the damaged one could not give."""
    terms = tuple(search_terms.split())
    suggest_inputs = _suggest_terms(kiwix_query, terms)
    damaged = getattr(kiwix_backend, "damaged", {})
    out: list[BookSearch] = []
    for book in searched_books:
        found = _search_book(kiwix_backend, book.name, terms, suggest_inputs)
        out.append(found)
        fallback = not found.candidates or book.name in damaged
        for older in _older_editions(superseded_books, book.name) if fallback else ():
            out.append(_without_paths(_search_book(kiwix_backend, older, terms, suggest_inputs), found))
            if out[-1].candidates:
                break
    return tuple(out)


def _without_paths(search: BookSearch, newer: BookSearch) -> BookSearch:
    """``search`` less the articles (paths) ``newer``, another edition of its book, already found."""
    held = {c.path for c in newer.candidates}
    return BookSearch(search.book, tuple(c for c in search.candidates if c.path not in held), search.error)


def _older_editions(superseded: Sequence[tuple[str, str]], newer: str) -> tuple[str, ...]:
    """The editions ``newer`` supersedes (``superseded_books`` pairs), newest first."""
    older = [old for old, new in superseded if new == newer]
    return tuple(sorted(older, key=lambda name: (_edition(name) or ("", ""))[1], reverse=True))


def book_ranking(
    book_searches: tuple[BookSearch, ...], search_terms: str, kiwix_query: str
) -> tuple[tuple[str, float], ...]:
    """Books ranked by evidence: (name, best candidate score), best first."""
    return _evidence_ranking(book_searches, tuple(search_terms.split()), kiwix_query)


@config.when(llm="none")
def selected_books__none(
    book_ranking: tuple[tuple[str, float], ...], kiwix_max_books: int = 2
) -> tuple[str, ...]:
    """Up to ``kiwix_max_books`` books with the best evidence; the first is the primary book."""
    return tuple(name for name, _ in book_ranking[: max(1, int(kiwix_max_books))])


@config.when(llm="openai")
def selected_books__openai(
    llm_client: Any,
    kiwix_catalog: KiwixCatalog,
    book_searches: tuple[BookSearch, ...],
    book_ranking: tuple[tuple[str, float], ...],
    kiwix_query: str,
    kiwix_max_books: int = 2,
) -> tuple[str, ...]:
    """The LLM's ranking of the books searched (an older edition searched where the newest found nothing
    among them; unknown names dropped); the evidence rule when nothing valid remains.

    No question (nothing routed to Kiwix) or no book to rank: no LLM call, no book."""
    limit = max(1, int(kiwix_max_books))
    names = {s.book for s in book_searches}
    searched_books = [b for b in kiwix_catalog.books if b.name in names]
    if not kiwix_query.strip() or not searched_books:
        return ()
    try:
        answer = llm_client.chat_json(
            _book_ranking_messages(kiwix_query, searched_books), BOOK_RANKING_SCHEMA
        )
    except FolioError as exc:
        logger.warning("book ranking by LLM failed, using evidence: %s", exc)
        answer = {}
    chosen = _valid_llm_books(answer, [b.name for b in searched_books], limit)
    return chosen or tuple(name for name, _ in book_ranking[:limit])


def kiwix_candidates(
    kiwix_backend: Any,
    book_searches: tuple[BookSearch, ...],
    selected_books: tuple[str, ...],
    disambiguation_candidates: tuple[Candidate, ...],
    search_terms: str,
) -> tuple[Candidate, ...]:
    """Candidates of the selected books plus disambiguation candidates (their excerpts rebuilt for the
    query like the others'), de-duplicated by (book, path)."""
    by_book = {s.book: s.candidates for s in book_searches}
    found = {(c.book, c.path) for b in selected_books for c in by_book.get(b, ())}
    extra = [c for c in disambiguation_candidates if (c.book, c.path) not in found]
    extra_with_passages = _with_passages(kiwix_backend, extra, search_terms.split())
    return _pool([*(by_book.get(b, ()) for b in selected_books), extra_with_passages])


def kiwix_errors(
    kiwix_backend: Any, kiwix_catalog: KiwixCatalog, book_searches: tuple[BookSearch, ...]
) -> tuple[tuple[str, str], ...]:
    """(book or server, reason) for the catalog that could not be read and every book that could not be
    opened or searched."""
    opened = [(name, err.reason) for name, err in getattr(kiwix_backend, "errors", {}).items()]
    if kiwix_catalog.error is not None:
        opened.insert(0, kiwix_catalog.error)
    searched = [(s.book, s.error) for s in book_searches if s.error]
    damaged = getattr(kiwix_backend, "damaged", {})
    skipped = [
        (s.book, f"{damaged[s.book]}: articles that cannot be read were skipped")
        for s in book_searches
        if s.book in damaged and not s.error
    ]
    return tuple(opened + searched + skipped)
