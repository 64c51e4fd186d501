"""Multi-book Kiwix fusion and passage answers: the Kiwix context built from the passages of the selected
books' best articles that answer the question, and the Kiwix stage's one result.

Passage (``_article_passage``): the best article's paragraphs, every section of it
(``Article.sections``: prose without infoboxes, navboxes, link lists, references, hatnotes or captions,
see ``nodes/backends/html_text.py``), are ranked against the question with the reader
(``nodes/core/sentence_scoring.py``: ``relevance``, by the question's words first, then the best
``PARAGRAPH_POOL`` again with the encoder when the graph has one; each paragraph and sentence is judged
under its article's title and section, which it is about even when it does not repeat them); the best
paragraph is split into sentences (``nodes/core/text.py``) and ``reading.passage`` picks the answer: the best
sentence with the neighbours it needs, at most ``answer_max_words`` words. The article's opening paragraph (an
encyclopedia article's summary) is preferred: another paragraph answers only when its relevance beats
the opening's by more than ``OPENING_MARGIN``, or when the question asks for a type of answer
(``nodes/backends/answer_types.py``: "what year" a year, "how many" an amount, "which lake" a name ending in
Lake) that the other paragraph holds and the opening does not (``OPENING_NEEDS_TYPE``). A "what is X"
question about the
article's own subject (the question's words are the title's) is answered from the lead's opening
sentence, the definition. A data table answers instead only when it matches the question at least
``TABLE_MARGIN`` better than every paragraph: its header row and its best rows. Each passage keeps its
article's URL (``zim://BOOK/PATH``, or the kiwix-serve URL) and the section it comes from ("" for the
lead) and its opening paragraph (``lead``: what the article is about, which the ask's Kiwix source
judges the question's subject by, ``nodes/query/source_fusion.py``). An article without sections (a page
with no prose) answers from its text's blocks. A book's best article whose passage does not hold the
question's subject (``subjects.unheld``: "Ray (film)" for a question on Ray Charles its passage says
nothing of) gives way to the first of its next ``NEXT_ARTICLES`` candidates titled by that subject that
holds it ("Ray Charles"); not to any article that merely holds it ("African Americans" for Africa's
mountains).

Multi-book fusion (``kiwix_context``): when more than one book was selected, each book's own best
scored result competes; books whose best score is at least ``multibook_threshold`` of the overall top
score survive. Several survivors: each one under a ``[BOOK — TITLE]`` header, highest score first (one
level of headers), holding its passage (what a person reads first) and then its article's text, the
whole cut to its share, ``fusion_max_chars_per_source`` characters at a word boundary (the design's
"full article, truncated", for an LLM reading the context and for ``folio kiwix``). Each section
(``KiwixContext.sections``) keeps the passage alone: the ask's Kiwix source shows those. One
survivor, one selected book, or only one fetch that succeeds: that passage alone, without a header. A
failed fetch becomes an error for that book; the others still answer.

``kiwix_result`` gathers what the query produced (search terms, searched and superseded books, the
selection, the scored candidates, the context and every error): the output of the Kiwix DAG
(``folio kiwix``, words only: no model is loaded there) and, in the ask graph (which passes its
``encoder``, or None), the input of the Kiwix source (``nodes/query/source_fusion.py``).

Config keys: ``multibook_threshold``, ``fusion_max_chars_per_source``, ``answer_max_words``.
Limitations: a book contributes one article and one passage (from one paragraph or one table); a
top score of zero or less keeps only the top book. ``truncate`` is public: cross-source fusion cuts
its sections the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from folio.nodes.backends.answer_types import answer_type, type_cue
from folio.nodes.core import reading, sentence_scoring
from folio.nodes.core.kiwix_types import (
    Article,
    ArticleSection,
    BookSearch,
    ContextSection,
    KiwixContext,
    KiwixResult,
    ScoredCandidate,
)
from folio.nodes.core.subjects import about_subject, unheld
from folio.nodes.core.text import is_definitional, sentences, stems, truncate, words
from folio.nodes.core.types import FolioError

PARAGRAPH_POOL = 8  # paragraphs ranked by words first; these best ones again with the encoder
OPENING_MARGIN = 0.15  # the article's opening paragraph (its summary) answers unless another beats it by this
OPENING_NEEDS_TYPE = True  # ... and holds an answer of the asked type when the best one does
ROW_SHARE = 0.8  # table rows kept: those scoring at least this share of the best row
TABLE_MARGIN = 0.2  # a table answers only when its relevance beats every paragraph's by this much
NEXT_ARTICLES = 2  # a best article without the question's subject gives way to one of its book's next ones

# --- pure helpers ----------------------------------------------------------------------------------


def _best_per_source(scored: Sequence[ScoredCandidate]) -> tuple[ScoredCandidate, ...]:
    """Each book's own best candidate (input is best first), in score order."""
    best: dict[str, ScoredCandidate] = {}
    for sc in scored:
        best.setdefault(sc.candidate.book, sc)
    return tuple(sorted(best.values(), key=lambda s: -s.score))


def _survivors(best: Sequence[ScoredCandidate], threshold: float) -> tuple[ScoredCandidate, ...]:
    """Sources whose best score is at least ``threshold`` of the top score (only the top if it is <= 0)."""
    if not best:
        return ()
    top = best[0].score
    if top <= 0:
        return (best[0],)
    return tuple(s for s in best if s.score >= threshold * top)


def _header(section: ContextSection) -> str:
    return f"[{section.source} — {section.title}]" if section.title else f"[{section.source}]"


def _with_article(passage: str, article_text: str, max_chars: int) -> str:
    """A multi-book section's body: the reader's passage first (what a person reads first), then the
    article's text (the design's "full article, truncated"), the whole cut to ``max_chars``."""
    rest = " ".join(article_text.split())
    if not rest or len(passage) + 2 >= max_chars:
        return truncate(passage, max_chars)
    return f"{passage}\n\n{truncate(rest, max_chars - len(passage) - 2)}".rstrip()


def _fuse(sections: Sequence[ContextSection], articles: Sequence[str] = (), max_chars: int = 1500) -> str:
    """One section: its text alone. Several: each under one ``[BOOK — TITLE]`` header, in the given order,
    its passage followed by its article's text (``articles``, one per section) cut to ``max_chars``."""
    if len(sections) == 1:
        return sections[0].text
    if not articles:
        bodies = [s.text for s in sections]
    else:
        bodies = [_with_article(s.text, a, max_chars) for s, a in zip(sections, articles, strict=True)]
    return "\n\n".join(f"{_header(s)}\n{body}" for s, body in zip(sections, bodies, strict=True))


def _article_sections(article: Article) -> tuple[ArticleSection, ...]:
    """The article's sections; an article without any gives one untitled section of its text's blocks."""
    if article.sections:
        return article.sections
    blocks = tuple(b.strip() for b in article.text.split("\n\n") if b.strip())
    return (ArticleSection("", blocks),) if blocks else ()


def _best(scores: Sequence[float]) -> int:
    """The index of the highest score, the earliest on ties."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def _in_context(article: str, section: str, text: str) -> str:
    """A text as the reader judges it: under its article's title and section, which it is about even
    when it does not repeat them ("He died at his home" in "Ray Charles › Death")."""
    return f"{article} › {section}\n{text}" if section else f"{article}\n{text}"


def _ranked_paragraphs(
    question: str, article: str, units: Sequence[tuple[str, str]], encoder: Any
) -> tuple[int, float]:
    """(index, relevance) of the paragraph that best answers ``question``; ``units`` are (section,
    paragraph), each judged under its article title and section. Words rank them all; with an encoder
    the ``PARAGRAPH_POOL`` best are ranked again by the reader with meaning."""
    texts = [_in_context(article, title, text) for title, text in units]
    scores = sentence_scoring.relevance(question, texts)
    if encoder is None or len(texts) <= 1:
        best = _best(scores)
        best = 0 if _opening_answers(question, texts, scores, best) else best
        return best, scores[best]
    pool = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:PARAGRAPH_POOL]
    pool.sort()
    again = sentence_scoring.relevance(question, [texts[i] for i in pool], encoder)
    best = _best(again)
    if pool[0] == 0 and _opening_answers(question, [texts[i] for i in pool], again, best):
        return 0, again[0]
    return pool[best], again[best]


def _opening_answers(question: str, texts: Sequence[str], scores: Sequence[float], best: int) -> bool:
    """The opening paragraph (``texts[0]``) answers instead of the best one: it scores within
    ``OPENING_MARGIN`` of it and, when the question asks for a type of answer (``answer_types``: a year,
    an amount, a name ...) that the best paragraph holds, it holds one too."""
    if scores[0] < scores[best] - OPENING_MARGIN:
        return False
    if not OPENING_NEEDS_TYPE or best == 0:
        return True
    typed = answer_type(question)
    asked = frozenset(words(question))
    return not typed.kind or type_cue(typed, texts[0], asked) >= type_cue(typed, texts[best], asked)


def _defines_article(question: str, title: str) -> bool:
    """A "what is X" question whose X is the article's subject: the question's words are the title's
    ("What is a noble gas?" of "Noble gas", not "What are the raccoon's most distinctive features?" of
    "Raccoon"). An encyclopedia article defines its subject first."""
    words = stems(title)
    return bool(words) and is_definitional(question) and words == stems(question)


def _sentence_passage(
    question: str, paragraph: str, encoder: Any, max_words: int, context: str = "", opening: bool = False
) -> str:
    """The reader's passage of one paragraph: its best sentence (judged under ``context``, the article
    and section) and the neighbours it needs; with ``opening``, the first sentence is the best one."""
    spans = sentences(paragraph)
    texts = [paragraph[s:e] for s, e in spans] or [paragraph]
    if opening:
        scores: Sequence[float] = [1.0] + [0.0] * (len(texts) - 1)
    else:
        scores = sentence_scoring.relevance(
            question, [f"{context}\n{t}" if context else t for t in texts], encoder
        )
    return " ".join(texts[i] for i in reading.passage(texts, scores, max_words))


def _table_passage(question: str, table: str, max_words: int) -> str:
    """A table's header row and its best rows (by the reader, words only), one row a line.

    Rows stand alone, so no neighbours are added: the best row and the rows scoring at least
    ``ROW_SHARE`` of it, in table order, within ``max_words``.
    """
    rows = table.split("\n")
    if len(rows) <= 1:
        return table
    header, body = rows[0], rows[1:]
    scores = sentence_scoring.relevance(question, body)
    best = max(scores)
    kept, words = [header], len(header.split())
    for row, score in zip(body, scores, strict=True):
        if score >= ROW_SHARE * best and (len(kept) == 1 or words + len(row.split()) <= max_words):
            kept.append(row)
            words += len(row.split())
    return "\n".join(kept)


def _article_passage(question: str, article: Article, encoder: Any, max_words: int) -> tuple[str, str]:
    """(section title, passage) of ``article`` that answers ``question`` (see the module docstring);
    ("", "") for an article without text."""
    sections = _article_sections(article)
    units = [(s.title, p) for s in sections for p in s.paragraphs]
    tables = [(s.title, t) for s in sections for t in s.tables]
    best_score = -1.0
    answer = ("", "")
    if units and _defines_article(question, article.title) and not sections[0].title:
        title, paragraph = units[0]
        return title, _sentence_passage(question, paragraph, encoder, max_words, opening=True)
    if units:
        index, best_score = _ranked_paragraphs(question, article.title, units, encoder)
        title, paragraph = units[index]
        context = _in_context(article.title, title, "").strip()
        answer = (title, _sentence_passage(question, paragraph, encoder, max_words, context))
    if tables:
        table_scores = sentence_scoring.relevance(
            question, [_in_context(article.title, t, x) for t, x in tables]
        )
        top = _best(table_scores)
        if table_scores[top] >= best_score + TABLE_MARGIN:
            title, table = tables[top]
            answer = (title, _table_passage(question, table, max_words))
    return answer


def _section_of(
    backend: Any, sc: ScoredCandidate, question: str, encoder: Any, max_chars: int, max_words: int
) -> tuple[ContextSection | None, str, str]:
    """(the passage of ``sc``'s article, the article's text, "") or (None, "", why it failed)."""
    cand = sc.candidate
    try:
        art = backend.article(cand.book, cand.path)
    except FolioError as exc:
        return None, "", exc.reason
    section, passage = _article_passage(question, art, encoder, max_words)
    if not passage:
        return None, "", f"{art.title}: the article has no text"
    opening = _article_sections(art)[0].paragraphs[:1]
    lead = truncate(opening[0], max_chars) if opening else ""
    found = ContextSection(
        cand.book, art.title, art.url, sc.score, truncate(passage, max_chars), art.path, section, lead
    )
    return found, art.text, ""


def _fetch_sections(
    backend: Any,
    chosen: Sequence[ScoredCandidate],
    question: str,
    encoder: Any,
    max_chars: int,
    max_words: int,
    others: Sequence[ScoredCandidate] = (),
) -> tuple[list[ContextSection], list[tuple[str, str]], list[str]]:
    """The passage of each chosen article, the errors of those that failed, and each article's text.
    A chosen article that does not hold the question's subject (``subjects.unheld``) gives way to the
    first of its book's next ``NEXT_ARTICLES`` candidates (``others``, best first) that is about that
    subject (``subjects.about_subject``: titled by it) and holds it."""
    sections: list[ContextSection] = []
    errors: list[tuple[str, str]] = []
    texts: list[str] = []
    for sc in chosen:
        found, text, why = _section_of(backend, sc, question, encoder, max_chars, max_words)
        if found is None:
            errors.append((sc.candidate.book, why))
            continue
        if unheld(question, found) is not None:
            nexts = [o for o in others if o.candidate.book == sc.candidate.book and o is not sc]
            for other in nexts[:NEXT_ARTICLES]:
                held, other_text, _ = _section_of(backend, other, question, encoder, max_chars, max_words)
                if held is not None and about_subject(question, held.title) and not unheld(question, held):
                    found, text = held, other_text
                    break
        sections.append(found)
        texts.append(text)
    return sections, errors, texts


# --- nodes -----------------------------------------------------------------------------------------


def kiwix_context(
    scored_candidates: tuple[ScoredCandidate, ...],
    selected_books: tuple[str, ...],
    kiwix_backend: Any,
    kiwix_query: str,
    encoder: Any = None,
    multibook_threshold: float | int = 0.5,
    fusion_max_chars_per_source: int = 1500,
    answer_max_words: int = 60,
) -> KiwixContext:
    """The passages of the selected books' best articles that answer the question (one level of
    headers when several books survive multi-book fusion)."""
    in_selection = [s for s in scored_candidates if s.candidate.book in selected_books]
    best = _best_per_source(in_selection)
    chosen = _survivors(best, float(multibook_threshold)) if len(selected_books) > 1 else best[:1]
    max_chars = int(fusion_max_chars_per_source)
    sections, errors, texts = _fetch_sections(
        kiwix_backend, chosen, kiwix_query, encoder, max_chars, int(answer_max_words), in_selection
    )
    text = _fuse(sections, texts, max_chars) if sections else ""
    return KiwixContext(text, tuple(sections), tuple(errors))


def kiwix_result(
    kiwix_query: str,
    search_terms: str,
    book_searches: tuple[BookSearch, ...],
    superseded_books: tuple[tuple[str, str], ...],
    selected_books: tuple[str, ...],
    scored_candidates: tuple[ScoredCandidate, ...],
    kiwix_context: KiwixContext,
    kiwix_errors: tuple[tuple[str, str], ...],
) -> KiwixResult:
    """Everything the Kiwix query produced: books (an older edition searched where the newest found
    nothing among them, no longer among those not searched), scored candidates, context and errors."""
    searched = tuple(s.book for s in book_searches)
    return KiwixResult(
        query=kiwix_query,
        search_terms=search_terms,
        selected_books=selected_books,
        candidates=scored_candidates,
        context=kiwix_context,
        errors=tuple(kiwix_errors) + kiwix_context.errors,
        searched_books=searched,
        superseded_books=tuple(pair for pair in superseded_books if pair[0] not in searched),
    )
