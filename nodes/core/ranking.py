"""The scoring rules shared by stages (pure; not a node module, never passed to a driver).

``rank_candidates``: the Kiwix scoring table — every candidate, from every path, gets the same additive
score (the ``scored_candidates`` node of ``nodes/kiwix/scoring.py``, and the Kiwix book selection in
``nodes/kiwix/candidates.py``, which ranks each book's first results by it).

The one retrieval path (issue 27): ``search_depth``, ``ranked_lexical``/``ranked_semantic`` (one lookup
per library, each list ``search_depth(k)`` deep, merged by ``merge_ranked``'s tie-break) and
``HitFusion`` (``fuse_convex``: the convex blend of max-normalised lexical and semantic scores, or
``fuse_rrf``), with ``search_text`` the text a query's meaning is encoded from, are what every search
runs: ``folio search``, HTTP ``/api/search`` and the eval (the search DAG, ``nodes/search/retrieval.py``),
the ask book flow (``nodes/query/book_flow.py``) and the book tools of the agent and the MCP server
(``nodes/backends/book_tools.py``).

The Kiwix table. Signals (points; each recorded in the candidate's breakdown when it fires):

* ``exact_title`` +20: the query and the title are identical (case-insensitive, trimmed).
* ``stemmed_title`` +15: the whole query, or any query word, stems to the title's core (only when
  ``exact_title`` did not fire; the core drops HTML, a trailing "(qualifier)" and a leading article).
* ``title_starts_with_term`` +10: the title's first word is a 4+ letter query word (stemmed).
* ``title_word_hits`` +5 per distinct stemmed query word that is also a stemmed title word.
* ``excerpt_overlap`` up to +10: share of the excerpt's words whose stem is a query stem, times 100,
  capped at 10 (a 10 % density earns the full 10). Excerpt length is counted in words.
* ``list_penalty`` -10: the title starts with "list of", "lists of", "index of", "outline of" or
  "category:"; always paired with ``list_offset`` +8 for a definitional query, else +3 (net -2 / -7).
* ``primary_book`` +2: the candidate comes from the primary (first selected) book.

"Query" means the cleaned search terms (stop words, possessives and punctuation removed, see
``nodes/kiwix/candidates.py``); only ``exact_title`` also accepts the raw question (trimmed, final ``?!.``
dropped),
so typing a title verbatim ("The Beatles") still counts as exact. Ties keep discovery order.

Words, stop words and stems come from ``nodes/core/text.py``: folded ``base_words`` of the text with HTML
stripped (titles and the question are folded too, so "Café" matches "cafe"), ``plural_stem``
(a title's stem must still be the title word, so no verb suffixes) and ``QUESTION_STOPWORDS``.
Differences from the design's table (issue 32; Kiwix questions, dev 58 / held-out 43, top-1 / top-5 /
MRR@10, ``--no-answers``, 2026-11-26): Folio stems the title's *core* (no "(qualifier)", no leading
article) where the table stems the whole title: with the table's word rule below, the whole title
measured 0.879 / 0.966 / 0.917 on dev against 0.897 / 0.983 / 0.937 with the core (held-out equal), so
the core stays. Folio used to refuse a query word
inside a multi-word name ("ray" of "Ray Charles"); the table as written measured 0.897 / 0.983 / 0.937
against 0.879 / 0.966 / 0.922 on dev (held-out equal at 0.861 / 0.930 / 0.888), so the table's rule is
used now. ``excerpt_overlap`` reads the rebuilt excerpt ("lead … passage", ``nodes/kiwix/candidates.py``), not
the search result's own excerpt: the search excerpt measured 0.845 / 0.966 / 0.905 on dev and 0.837 /
0.930 / 0.876 held-out, against 0.879 / 0.966 / 0.922 and 0.861 / 0.930 / 0.888 (same run, before the
table's word rule above was taken up).

Limitations: the stemmer is a tiny English plural stripper, not Porter; titles and excerpts are
compared as bags of words, so word order and synonyms are invisible.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from folio.nodes.backends.book_store import scopes
from folio.nodes.core.kiwix_types import Candidate, ScoredCandidate
from folio.nodes.core.text import (
    STOPWORDS,
    base_word,
    base_words,
    content_words,
    fold,
    is_definitional,
    named_phrases,
    plural_stem,
    stem,
    stems,
    strip_html,
    tokens,
)
from folio.nodes.core.types import Hit
from folio.nodes.core.word_forms import name_spellings

EXACT_TITLE = 20.0


STEMMED_TITLE = 15.0


TITLE_STARTS_WITH_TERM = 10.0


TITLE_WORD_HIT = 5.0


EXCERPT_OVERLAP_MAX = 10.0


EXCERPT_FULL_DENSITY = 0.10  # share of excerpt words matching the query that earns the full 10 points


LIST_PENALTY = -10.0


LIST_OFFSET_DEFINITIONAL = 8.0


LIST_OFFSET_OTHER = 3.0


PRIMARY_BOOK = 2.0


_LIST_PREFIXES = ("list of", "lists of", "index of", "outline of", "category:")


_QUALIFIER_RE = re.compile(r"\s*\([^)]*\)\s*$")


_LEADING_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+")


def _words(text: str) -> tuple[str, ...]:
    """The folded words of ``text`` without possessive endings, HTML tags removed and entities decoded."""
    return tuple(base_words(strip_html(text)))


def _stems(items: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(plural_stem(w) for w in items)


def unqualified(title: str) -> str:
    """A title without its trailing "(qualifier)": "Ray (film)" -> "Ray"."""
    return _QUALIFIER_RE.sub("", title)


def _title_core(title: str) -> str:
    """The stemmed core of a title: no HTML, no trailing "(qualifier)", no leading article."""
    plain = strip_html(title).strip().lower()
    plain = _LEADING_ARTICLE_RE.sub("", unqualified(plain))
    return " ".join(_stems(_words(plain)))


def _title_match_units(terms: tuple[str, ...]) -> frozenset[str]:
    """What a title core may equal for ``stemmed_title``: the whole query or any query word (the table
    as written; the exception Folio had for a word inside a multi-word name, "ray" of "Ray Charles",
    measured worse: see the module docstring)."""
    return frozenset(u for u in {" ".join(_stems(terms)), *_stems(terms)} if u)


def _is_list_title(title: str) -> bool:
    return strip_html(title).strip().lower().startswith(_LIST_PREFIXES)


def _normalised_question(question: str) -> str:
    return fold(re.sub(r"\s+", " ", question.strip().rstrip("?!.").strip()))


def _excerpt_points(query_stems: frozenset[str], excerpt: str) -> float:
    excerpt_words = _words(excerpt)
    if not excerpt_words or not query_stems:
        return 0.0
    overlap = sum(1 for s in _stems(excerpt_words) if s in query_stems)
    density = overlap / len(excerpt_words)
    return round(min(EXCERPT_OVERLAP_MAX, EXCERPT_OVERLAP_MAX * density / EXCERPT_FULL_DENSITY), 3)


def _signals(
    candidate: Candidate, terms: tuple[str, ...], question: str, primary: str
) -> tuple[tuple[str, float], ...]:
    """Every signal that fires for ``candidate``, in table order."""
    title_plain = fold(strip_html(candidate.title)).strip()
    title_plain = re.sub(r"\s+", " ", title_plain)
    query = " ".join(terms)
    query_stems = _stems(terms)
    title_words = _words(candidate.title)
    title_stems = set(_stems(title_words))
    signals: list[tuple[str, float]] = []

    if title_plain and title_plain in {query, _normalised_question(question)}:
        signals.append(("exact_title", EXACT_TITLE))
    else:
        core = _title_core(candidate.title)
        if core and core in _title_match_units(terms):
            signals.append(("stemmed_title", STEMMED_TITLE))
    if title_words and any(len(t) >= 4 and plural_stem(t) == plural_stem(title_words[0]) for t in terms):
        signals.append(("title_starts_with_term", TITLE_STARTS_WITH_TERM))
    hits = len(set(query_stems) & title_stems)
    if hits:
        signals.append(("title_word_hits", TITLE_WORD_HIT * hits))
    excerpt = _excerpt_points(frozenset(query_stems), candidate.excerpt)
    if excerpt:
        signals.append(("excerpt_overlap", excerpt))
    if _is_list_title(candidate.title):
        signals.append(("list_penalty", LIST_PENALTY))
        offset = LIST_OFFSET_DEFINITIONAL if is_definitional(question) else LIST_OFFSET_OTHER
        signals.append(("list_offset", offset))
    if primary and candidate.book == primary:
        signals.append(("primary_book", PRIMARY_BOOK))
    return tuple(signals)


def _score(candidate: Candidate, terms: tuple[str, ...], question: str, primary: str) -> ScoredCandidate:
    breakdown = _signals(candidate, terms, question, primary)
    return ScoredCandidate(candidate, round(sum(p for _, p in breakdown), 3), breakdown)


def rank_candidates(
    candidates: tuple[Candidate, ...], terms: tuple[str, ...], question: str, primary: str
) -> tuple[ScoredCandidate, ...]:
    """Score every candidate; highest first, ties in discovery order (stable sort)."""
    scored = [_score(c, terms, question, primary) for c in candidates]
    return tuple(sorted(scored, key=lambda s: -s.score))


def max_normalised(hits: Sequence[Hit]) -> dict[tuple[str, str], float]:
    """Each hit's score as a fraction of the list's best score (0 for a non-positive best)."""
    if not hits:
        return {}
    best = max(h.score for h in hits)
    return {(h.book_id, h.chunk_id): (h.score / best if best > 0 else 0.0) for h in hits}


def fuse_convex(lexical: Sequence[Hit], semantic: Sequence[Hit], weight: float, k: int) -> tuple[Hit, ...]:
    """Convex combination of max-normalised scores; ties broken by lexical then semantic score."""
    lex, sem = max_normalised(lexical), max_normalised(semantic)
    by_key = {(h.book_id, h.chunk_id): h for h in [*semantic, *lexical]}
    fused = []
    for key, hit in by_key.items():
        ls, ss = lex.get(key, 0.0), sem.get(key, 0.0)
        score = weight * ls + (1.0 - weight) * ss
        fused.append((score, ls, ss, hit))
    fused.sort(key=lambda t: (-t[0], -t[1], -t[2], t[3].book_id, t[3].start))
    return tuple(
        replace(h, score=s, signals=(("lexical", ls), ("semantic", ss))) for s, ls, ss, h in fused[:k]
    )


def fuse_rrf(
    lexical: Sequence[Hit], semantic: Sequence[Hit], weight: float, rrf_k: int, k: int
) -> tuple[Hit, ...]:
    """Weighted reciprocal rank fusion (``weight`` on the lexical list, ``1 - weight`` on the semantic)."""
    scores: dict[tuple[str, str], float] = {}
    by_key: dict[tuple[str, str], Hit] = {}
    for w, hits in ((weight, lexical), (1.0 - weight, semantic)):
        for rank, h in enumerate(hits):
            key = (h.book_id, h.chunk_id)
            scores[key] = scores.get(key, 0.0) + w / (rrf_k + rank + 1)
            by_key.setdefault(key, h)
    order = sorted(scores, key=lambda key: (-scores[key], by_key[key].book_id, by_key[key].start))
    return tuple(replace(by_key[key], score=scores[key]) for key in order[:k])


def search_text(query: str) -> str:
    """The text a query's meaning is encoded from: its words, without the closing "?" (and "." or ",").
    The ask searches a question's clauses, which the router splits on "?", so ``folio search "...?"`` and
    the ask must encode the same text to rank alike: MiniLM's vectors of "...letter?" and "...letter"
    differ enough to reorder a semantic list. The words (the lexical list) never see the "?"."""
    return " ".join(query.split()).strip(" ,.?") or query


def search_depth(k: int) -> int:
    """How deep each list (lexical, semantic) is retrieved before fusion or cutting to ``k``."""
    return max(3 * int(k), 30)


def merge_ranked(per_book: Sequence[Sequence[Hit]], k: int) -> tuple[Hit, ...]:
    """The best ``k`` of several ranked lists: score, then book, offset and chunk id (the one tie-break)."""
    hits = [h for hs in per_book for h in hs]
    hits.sort(key=lambda h: (-h.score, h.book_id, h.start, h.chunk_id))
    return tuple(hits[:k])


def ranked_lexical(
    stores: Sequence[Any], query: str, k: int, chapter_ids: Sequence[str] | None
) -> tuple[Hit, ...]:
    """bm25-ranked chunks of ``stores`` (in ``chapter_ids``), ``search_depth(k)`` deep, one lookup per
    library."""
    depth = search_depth(k)
    return merge_ranked([i.lexical(query, depth, ids, chapter_ids) for i, ids in scopes(stores)], depth)


def ranked_semantic(
    stores: Sequence[Any], vector: Any, k: int, chapter_ids: Sequence[str] | None
) -> tuple[Hit, ...]:
    """Cosine-ranked chunks of ``stores`` (in ``chapter_ids``), ``search_depth(k)`` deep, one lookup per
    library."""
    depth = search_depth(k)
    return merge_ranked([i.semantic(vector, depth, ids, chapter_ids) for i, ids in scopes(stores)], depth)


BESIDE_CHUNKS = 20_000  # from this many chunks in a library its lexical lookup runs beside the query encode
_LEXICAL_THREAD = ThreadPoolExecutor(1, thread_name_prefix="folio-lexical")  # its thread starts on first use


@dataclass(frozen=True, eq=False)
class LexicalSearch:
    """``ranked_lexical``'s list, started by ``started_lexical``: ``done``, or ``pending`` on the lexical
    thread while the caller encodes the query."""

    done: tuple[Hit, ...] = ()
    pending: Future[tuple[Hit, ...]] | None = None

    @property
    def encode_threads(self) -> int:
        """torch threads for the query encode meanwhile: 1 while the lookup holds the other core, 0 (the
        default) otherwise."""
        return 1 if self.pending is not None else 0

    def hits(self) -> tuple[Hit, ...]:
        """The list (waiting for the lexical thread; its error, if any, is raised here)."""
        return self.pending.result() if self.pending is not None else self.done


def lexical_beside(stores: Sequence[Any]) -> bool:
    """Whether a lexical lookup of ``stores`` is worth a thread of its own: their library holds at least
    ``BESIDE_CHUNKS`` chunks (at 2 M windows the lookup takes about as long as encoding the query; at
    ten books a fifth of it, and the handover would cost more than it saves)."""
    indexes = {id(s.index): s.index for s in stores}
    counts = [getattr(i, "chunk_total", None) for i in indexes.values()]
    return len(counts) == 1 and counts[0] is not None and counts[0]() >= BESIDE_CHUNKS


def started_lexical(
    stores: Sequence[Any], query: str, k: int, chapter_ids: Sequence[str] | None
) -> LexicalSearch:
    """``ranked_lexical(stores, query, k, chapter_ids)`` on the lexical thread when ``lexical_beside`` and
    whole books are searched (same hits, the caller's encode overlapping it), or here and now (a chapter
    scope reads few rows)."""
    stores = tuple(stores)
    if chapter_ids is not None or not lexical_beside(stores):
        return LexicalSearch(ranked_lexical(stores, query, k, chapter_ids))
    return LexicalSearch(pending=_LEXICAL_THREAD.submit(ranked_lexical, stores, query, k, chapter_ids))


@dataclass(frozen=True)
class HitFusion:
    """How a lexical and a semantic list become one: ``convex`` (``fuse_convex``) or ``rrf``
    (``fuse_rrf``), ``weight`` on the lexical list (``hybrid_lexical_weight``)."""

    name: str = "convex"
    weight: float = 0.7
    rrf_k: int = 60

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HitFusion:
        """The fusion a config's ``hybrid_fusion``, ``hybrid_lexical_weight`` and ``hybrid_rrf_k`` name (the
        search DAG's and the ask book flow's): for callers outside a DAG, such as the MCP book tools."""
        return cls(
            str(config.get("hybrid_fusion") or cls.name),
            float(config.get("hybrid_lexical_weight", cls.weight)),
            int(config.get("hybrid_rrf_k") or cls.rrf_k),
        )

    def __call__(self, lexical: Sequence[Hit], semantic: Sequence[Hit], k: int) -> tuple[Hit, ...]:
        if self.name == "rrf":
            return fuse_rrf(lexical, semantic, float(self.weight), int(self.rrf_k), int(k))
        return fuse_convex(lexical, semantic, float(self.weight), int(k))


# --- names held by a text: the evidence rule's names (book flow) and a Kiwix citation's subject ---


def name_phrases(question: str) -> tuple[str, ...]:
    """The question's names as written (``named_phrases``); a lone capitalised first word is the
    sentence's capital, not a name ("Describe the wolf")."""
    found = tokens(question)
    first = fold(found[0]) if found else ""
    return tuple(phrase for phrase in named_phrases(question) if " " in phrase or fold(phrase) != first)


_CAPITALISED = r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*"
_TITLE = re.compile(
    rf"(?:(?:The|A|An)\s+)?{_CAPITALISED}(?:\s+(?:and|of|in|with)\s+(?:(?:the|a|an)\s+)?{_CAPITALISED})+"
)


def title_phrase(question: str, name: str) -> str:
    """The title-like phrase of the question around one of its names: capitalised words joined by "and
    (the)", "of (the)", "in", "with" ("The Wolf and the Seven Kids" around "Seven Kids"), else the name."""
    for found in _TITLE.finditer(question):
        if name in found.group(0) and found.group(0) != name:
            return found.group(0)
    return name


def names_in(question: str) -> tuple[tuple[str, ...], ...]:
    """The question's names (``name_phrases``) as their words."""
    return tuple(tuple(tokens(phrase)) for phrase in name_phrases(question))


def _near(word: str, known: Collection[str], names: Collection[str]) -> bool:
    """``word`` is in ``known``, or (5+ letters) one slip away from a word of ``names`` (a letter added,
    dropped, changed or two swapped: "Jemina" for "Jemima", "Issac" for "Isaac"; or a letter moved in a
    name of 7+ letters, ``_moved_letter``: "Lucdina" for "Lucinda"); slips are forgiven
    against names only, so "Bennet" is not held by "bonnet" nor "Harry" by "carry"."""
    if word in known:
        return True
    if len(word) < 5:
        return False
    return any(_name_slip(word, k) for k in names)


def _name_slip(a: str, b: str) -> bool:
    """What a name may be asked with and still be ``b``: one slip (``_one_slip``) or a letter moved."""
    return _one_slip(a, b) or _moved_letter(a, b)


def _moved_letter(a: str, b: str) -> bool:
    """``a`` is the name ``b`` (7+ letters) with a letter moved after its first three ("Lucdina" for
    "Lucinda"): two slips, but the same letters; forgiven against names only (``_name_slip``)."""
    return len(a) >= 7 and a != b and a[:3] == b[:3] and sorted(a) == sorted(b)


def _one_slip(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by one slip (lengths at most one apart; ``one_edit``)."""
    return abs(len(a) - len(b)) <= 1 and one_edit(a, b)


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one insertion, deletion, substitution or transposition."""
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return a[i + 1 :] == b[i + 1 :] or (a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :])
    return a[i:] == b[i + 1 :]


def missing_names(question: str, texts: Sequence[str]) -> tuple[str, ...]:
    """The question's names that the evidence ``texts`` do not hold. A name is held when one text holds
    each of its content words (light stems, any case; one slip after the first two letters forgiven
    against a name there; "Long John Silver" is not held by "long" in one chunk, "John" in another and
    "silver" in a third)
    and its last word there capitalised, as a name, or the whole name there as consecutive words
    ("Captain Hook" is not held by a text about a captain and his hooks; "Red-Headed League" is held by
    "the Redheaded League", "Puddle-Ducks" by "Puddle-ducks")."""
    names = _name_plan(question)[0]
    if not names:
        return ()
    every = frozenset(names)
    held: set[tuple[str, ...]] = set()
    for text in texts:
        held |= _held_names(question, text)
        if held >= every:
            break
    return tuple(" ".join(name) for name in names if name not in held)


@functools.lru_cache(maxsize=256)
def _name_plan(
    question: str,
) -> tuple[tuple[tuple[str, ...], ...], dict[tuple[str, ...], tuple[tuple[str, ...], ...]], frozenset[str]]:
    """The question's names, each name's spellings (``word_forms.name_spellings``) and the first two
    letters of their stems (what ``_name_words`` keeps of a text), made once per question."""
    names = names_in(question)
    spellings = {name: name_spellings(name) for name in names}
    wanted = [stem(w) for forms in spellings.values() for f in forms for w in content_words(" ".join(f))]
    return names, spellings, frozenset(w[:2] for w in wanted)


@functools.lru_cache(maxsize=2048)
def _held_names(question: str, text: str) -> frozenset[tuple[str, ...]]:
    """The question's names that ``text`` holds (``missing_names``), remembered per question and text:
    an ask's evidence rules, routing and subject checks ask it of the same chunks many times."""
    names, spellings, prefixes = _name_plan(question)
    found = _name_words(text, prefixes)
    return frozenset(name for name in names if any(_holds(text, form, *found) for form in spellings[name]))


def respellings(question: str, texts: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(word as asked, the texts' spelling)`` for each word of the question's names (5+ letters) that no
    text holds as written but that one slip turns into a name the texts write capitalised more often
    than not ("Mitthens" for Potter's "Mittens"; "Bonnet" is no name where "bonnet" is written), or
    that the texts' name completes when another word of the name is written as asked ("Tabitha Twitch");
    of several such names, the one written most often. The evidence rule forgives a slip
    (``missing_names``), but the search does not find the misspelt word."""
    written = [tok for text in texts for tok in tokens(text)]
    lower = Counter(fold(tok) for tok in written if not tok[:1].isupper())
    upper = Counter(tok for tok in written if tok[:1].isupper())
    held = {fold(tok) for tok in written}
    out: list[tuple[str, str]] = []
    for name in names_in(question):
        for word in name:
            low = fold(word)
            if len(low) < 5 or not low.isalpha() or low in held or any(word == w for w, _ in out):
                continue
            others_held = any(fold(w) in held for w in name if w != word and w[:1].isupper())
            near = [
                (n, tok)
                for tok, n in upper.items()
                if n > lower[fold(tok)] and _slip(low, fold(tok), others_held)
            ]
            if near:
                out.append((word, max(near)[1]))
    return tuple(out)


def word_respellings(question: str, texts: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(word as asked, the texts' word)`` for each lower-case content word of the question (5+ letters,
    outside its names) that no text holds (light stems) but that one slip after its first two letters
    turns into a word the texts write in lower case at least twice ("hosue" / "house", "parsely" /
    "parsley"; the most frequent of several), or into the stem of words they write so ("behaed" /
    "beheaded": ``_slipped_into``). The caller checks that the library holds the asked word
    nowhere and that the encoder's vocabulary does not know it (a real word is no slip). The texts are
    searched (one regular expression a word: its first two letters, about its length) only for a word
    that none of them holds, which their remembered stems tell: most questions cost a set lookup a word."""
    named = {fold(w) for name in names_in(question) for w in name}
    asked = [
        (word, fold(word))
        for word in dict.fromkeys(tokens(question))
        if not word[:1].isupper() and len(word) >= 5 and word.isalpha() and fold(word) not in named
    ]
    asked = [(word, low) for word, low in asked if low not in STOPWORDS]
    if not asked:
        return ()
    held = frozenset().union(*(stems(text) for text in texts))
    unheld = [(word, low) for word, low in asked if stem(low) not in held]
    if not unheld:
        return ()
    out: list[tuple[str, str]] = []
    for word, low in unheld:
        # the texts' lower-case words of its first two letters and about its length, or longer by an
        # ending (one regular expression a text: a warm ask is not slowed by reading every word of twenty
        # chunks)
        like = re.compile(rf"\b{re.escape(low[:2])}[^\W\d_]{{{len(low) - 3},{len(low) + ENDING}}}\b")
        written = Counter(fold(tok) for text in texts for tok in like.findall(text))
        own = _slipped_into(low, written)
        if own:
            out.append((word, own))
    return tuple(out)


ENDING = 3  # letters of an ending ("-ing", "-ed") a texts' word may add to the one a slip makes


def _slipped_into(low: str, written: Counter[str]) -> str | None:
    """The texts' word (``written``: lower-case words and their counts) that ``low`` is with one slip
    after its first two letters, written at least twice (the most frequent); else the most frequent
    stem that ``low`` is with one slip, its forms written at least twice together, in its shortest
    form ("behaed" / "beheaded" of "beheaded" and "beheading": no text says "behead"), or None."""
    near = [
        (n, tok)
        for tok, n in written.items()
        if n >= 2 and len(tok) <= len(low) + 1 and _first_kept(low, tok)
    ]
    if near:
        return max(near)[1]
    by_stem: dict[str, Counter[str]] = {}
    for tok, n in written.items():
        by_stem.setdefault(stem(tok), Counter())[tok] += n
    roots = [
        (sum(c.values()), root)
        for root, c in by_stem.items()
        if len(root) >= 5 and root != low and sum(c.values()) >= 2 and _first_kept(low, root)
    ]
    if not roots:
        return None
    forms = by_stem[max(roots)[1]]
    return min(forms, key=lambda tok: (len(tok), -forms[tok], tok))  # the shortest, "-ed" before "-ing"


def _first_kept(asked: str, own: str) -> bool:
    """``own`` is ``asked`` with one slip after its first two letters (as ``missing_names`` forgives one:
    "yearly" is not "early")."""
    return own[:2] == asked[:2] and _one_slip(asked, own)


def _slip(asked: str, own: str, others_held: bool) -> bool:
    """``asked`` is ``own`` written with a slip (``_name_slip``), or (``others_held``: another word of the
    name is the book's) cut short by three letters at most ("Mrs. Tabitha Twitch" for "Twitchit")."""
    if _name_slip(asked, own):
        return True
    return others_held and own.startswith(asked) and len(own) - len(asked) <= 3


def _holds(text: str, name: tuple[str, ...], words: frozenset[str], capitalised: frozenset[str]) -> bool:
    """Whether ``text`` (its ``_name_words``) holds ``name`` (see ``missing_names``)."""
    head = name[-1]
    as_name = not head.isalpha() or _near(stem(fold(head)), capitalised, capitalised)
    if not as_name:
        phrase = re.compile(r"\b" + r"\W+".join(re.escape(t) for t in name) + r"\b", re.IGNORECASE)
        if not phrase.search(text):
            return False
    return all(_near(stem(w), words, capitalised) for w in content_words(" ".join(name)))


@functools.lru_cache(maxsize=1024)
def _name_words(text: str, prefixes: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The words of ``text`` that may hold a name's words (those opening with one of ``prefixes``), as
    light stems of their base forms: all of them, and the capitalised ones. Remembered per text and
    prefixes: an ask's evidence rules read the same chunks for the same names several times."""
    seen = {tok for tok in tokens(text) if tok[:2].lower() in prefixes}
    words = frozenset(stem(base_word(fold(tok))) for tok in seen)
    capitalised = frozenset(stem(base_word(fold(tok))) for tok in seen if tok[0].isupper())
    return words, capitalised
