"""The one text toolkit of every stage (pure functions; not a node module, never passed to a driver).

Every stage tokenises, folds, drops stop words, stems and splits sentences with these names, so a
word means the same thing in the lexical index, the router, the book tools, the answerer, the concept
maps, the evaluation and the Kiwix query path.

Tokens
    ``WORD``: a word is a run of letters and digits; apostrophes inside a word keep it whole
    ("Ahab's", "don't", "o'clock"); ``_`` and every other character separate words.
    ``tokens(text)`` the words as written; ``word_spans(text)`` (folded word, start, end) of each;
    ``fold(text)`` lower case, accents stripped, ``’`` -> ``'``; ``words(text)`` the folded words.
    ``strip_html(text)`` tags removed and entities decoded (Kiwix titles and excerpts).
    ``NAME_WORD``: the concept maps' name tokens, letters only, joined by apostrophes and hyphens
    ("Rose-Bud", "O'Brien"); digits never start or continue a name.
Possessives
    ``strip_possessives(text)`` drops "'s" and a plural's trailing "'" ("Ahab's leg", "the Beatles'
    song"); ``base_word(word)`` drops a folded word's "'s"; ``base_words(text)`` the folded words so.
Stop words
    ``STOPWORDS``: English function words and their contractions, plus "tell"/"say"/"said"/"says".
    ``QUESTION_STOPWORDS`` = ``STOPWORDS`` plus the words of how a question is asked ("happened",
    "called", "known", "thing", "like", ...), minus the words of titles of songs, films and books
    ("n't" contractions and "say"/"said"/"says": "What'd I Say", "I Can't Stop Loving You"): Kiwix
    query cleaning and named phrases, where a question often quotes an article title. The asked words
    are content in a book's text, and "said" is noise in a book's dialogue.
    ``content_words(text)`` the base words that are not ``STOPWORDS`` (all of them when none is left).
Stems
    ``stem(word)`` the light stemmer of book text: the first of "ingly", "edly", "ing", "ies", "ied",
    "es", "ed", "ly", "s" that leaves four letters is stripped ("hunting" -> "hunt", "galaxies" ->
    "galaxy"). ``stems(text)`` the stems of the content words (memoised per text, ``STEMS_CACHED``:
    a warm ask re-reads the same chunks); ``coverage(terms, text)`` the share of
    ``terms`` (stems) among them (the router, the evidence check, the answerer, fusion).
    ``plural_stem(word)`` the Kiwix title matcher's stemmer: English plurals only ("galaxies" ->
    "galaxy", "boxes" -> "box", "horses" -> "horse"; "virus", "glass", "analysis", "this" stay), since
    a title's stem must still be the title's word. One stemmer was tried for both and measured worse
    each way: ``plural_stem`` then ``stem``'s verb suffixes cost a gold citation on FairytaleQA, and
    that stemmer on Kiwix titles cost a top-1 on the Kiwix question sets.
Questions
    ``named_phrases(question)`` runs of capitalised words ("Apollo 13", "Georgia on My Mind");
    ``is_definitional(question)`` "what is X" / "tell me about X"; ``question_kind(question)``
    "concrete" or "conceptual" (which book search goes first). Shared by routing, the book flow, the
    answerer, Kiwix search, disambiguation and scoring.
Sentences
    ``sentences(text)`` character spans of the sentences, whitespace trimmed: a sentence ends at
    ``.!?`` runs (closing quotes and brackets stay with it) and at a blank line (a heading is its own
    sentence; a paragraph ending in ",", ";", ":" or a dash runs on: 'and said to Grethel,' + the
    speech), except after one of ``ABBREVIATIONS`` as written ("Mr.", "Dr.", "St.", "Esq.", "No.",
    "vs.", the titles "Sgt.", "Capt.", "Col.", "Gen.", "Lt.", "Rev.", "Prof.", "Hon.", "Fr.", ...; "no."
    ends a sentence), after a single capital initial ("J. R. R. Tolkien"; but "U.S.A. That"
    ends: an initial followed by a capitalised function word), inside a word ("U.S.A.", "3.5"), or when
    the next part opens with a lower-case letter or inner punctuation (dialogue tags: '"Stop!" cried
    he.'; '"Table, be covered!" all at once'). ``TITLE_ABBREVIATIONS`` are those that stand before a name
    ("Mr. Holmes", "St. Clair"): the concept maps read a name across their period. A month abbreviated
    before a number does not end one ("When it came to Jan. 1st there was still no money"), nor does a
    speaker's name in capitals opening a paragraph of a dialogue set as a play (Flatland's "SPHERE. Well,
    then, ..." and "I. But my Lord ..."). Measured against
    ``pysbd``, ``sentencex`` and ``syntok`` on golden cases from the books (tests/test_text.py): 16/16
    here, 14, 14 and 13 there; ``sentencex`` (as fast) keeps a whole quoted speech as one sentence (5%
    of Sherlock Holmes's sentences over 60 words, 0.5% here), too coarse for a 60-word answer.
Lexical index
    ``fts_match_expression(query)`` a safe FTS5 MATCH expression: every content word quoted, OR-ed.
    ``fts_tokens(text)`` the words cut at apostrophes as FTS5 cuts them; ``fts_phrases(query)`` the
    whole query and its quoted parts as phrases, ``fts_shingles(query)`` its 3-word runs holding a
    content word; ``fts_phrase_expression(phrases)`` a safe MATCH expression for them (the store's
    phrase and proximity bonuses).
Length
    ``truncate(text, max_chars)`` at most ``max_chars`` characters, cut back to a space (fusion).

Limitations: English only; the stemmers are rule lists, not Porter (irregular forms stay apart:
"mice"/"mouse", "ran"/"run"); an initial or abbreviation that really ends a sentence ("... plan B. Then")
joins it to the next; "!" or "?" inside a quotation followed by a capital ends a sentence ('"I have it! It
has happened."' is two), so a sentence may open a quotation that the next one closes.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata

_STOPWORDS_TEXT = """
    a about above after again against all also am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
    isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only or
    other ought our ours ourselves out over own same shan't she she'd she'll she's should shouldn't so
    some such than that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's whom why
    why's will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    tell say said says
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
STEMS_CACHED = 16_384  # texts whose stems ``stems`` remembers (chunks and sentences an ask meets again)
STEMS_CACHED_CHARS = 8_000  # a longer text (a chapter) is stemmed every time, never held

_QUESTION_WORDS_TEXT = """
    anyone anything someone something thing things called known deal happen happened else
    ever get gets got however just let lets like might much must now one please really shall us whose
"""
# words of song, film and book titles ("What'd I Say", "I Can't Stop Loving You"): kept in Kiwix queries
_TITLE_WORDS = frozenset({w for w in STOPWORDS if w.endswith("n't")} | {"say", "said", "says"})
QUESTION_STOPWORDS = (STOPWORDS - _TITLE_WORDS) | frozenset(_QUESTION_WORDS_TEXT.split())

TITLE_ABBREVIATIONS = frozenset(
    [
        *("Mr", "Mrs", "Ms", "Messrs", "Mme", "Dr", "St", "Capt", "Col", "Gen", "Maj", "Lt", "Sgt", "Cpl"),
        *("Prof", "Rev", "Hon", "Fr", "Gov", "Sen"),
    ]
)
ABBREVIATIONS = TITLE_ABBREVIATIONS | frozenset(["Sr", "Jr", "Esq", "Mt", "No", "vs"])
# a month's abbreviations, as older books write a date ("When it came to Jan. 1st there was still no
# money"); not "Mar", a word ("they mar the view"): the name rule reads these (``word_forms``); a sentence
# runs on past any of them, "Mar." too, when a number follows
MONTH_ABBREVIATIONS = {
    "january": ("Jan",),
    "february": ("Feb",),
    "april": ("Apr",),
    "june": ("Jun",),
    "july": ("Jul",),
    "august": ("Aug",),
    "september": ("Sept", "Sep"),
    "october": ("Oct",),
    "november": ("Nov",),
    "december": ("Dec",),
}
_DATED = frozenset(["Mar", *(a for short in MONTH_ABBREVIATIONS.values() for a in short)])

WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
NAME_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")
_TAG = re.compile(r"<[^>]+>")
_POSSESSIVE = re.compile(r"(?<=[^\W_])['’]s\b|(?<=s)['’](?=\s|$)", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"'”’)\]]*|$)")
_ABBREVIATED = re.compile(r"\b([^\W\d_]+)\.$")
_FIRST_WORD = re.compile(r"[\"'“‘(\[]*([^\W_]+)")
_INNER_PUNCTUATION = frozenset(",;:)]—–-")
_SPEAKER = re.compile(r"(?:[A-Z][A-Z'’-]+|I)\.")  # a play's speaker opening a paragraph: "SPHERE. Well, then"
_OPEN_ENDINGS = frozenset(",;:—–-")  # a paragraph ending so runs on into the next one
_BLOCK = re.compile(r"(?:[^\n]|\n(?![ \t]*\n))+")  # paragraphs: text between blank lines
_APOSTROPHE = re.compile(r"['’]")

_PLURAL_EXCEPTIONS = frozenset({"this", "less", "across", "always", "towards", "its", "has", "was", "does"})
_ES_AFTER = ("ss", "sh", "ch", "x", "z")
_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "es", "ed", "ly", "s")


# --- tokens --------------------------------------------------------------------------------------------


def fold(text: str) -> str:
    """Lower-case, strip accents, unify apostrophes: "Café Ahab’s" -> "cafe ahab's"."""
    if text.isascii():  # nothing to decompose or unify
        return text.lower()
    text = unicodedata.normalize("NFKD", text.replace("’", "'"))
    return "".join(ch for ch in text if not unicodedata.combining(ch)).lower()


def tokens(text: str) -> list[str]:
    """The words of ``text`` as written (case and accents kept; inner apostrophes kept)."""
    return WORD.findall(text)


def words(text: str) -> list[str]:
    """Folded word tokens (letters and digits; inner apostrophes kept)."""
    return WORD.findall(fold(text))


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """(folded word, start, end) of every word of ``text``; offsets index ``text`` itself."""
    return [(fold(m.group()), m.start(), m.end()) for m in WORD.finditer(text)]


def strip_html(text: str) -> str:
    """``text`` without HTML tags, entities decoded ("<b>Emu</b> &amp; kin" -> "Emu & kin")."""
    return html.unescape(_TAG.sub("", text))


# --- possessives -------------------------------------------------------------------------------------


def strip_possessives(text: str) -> str:
    """``text`` without possessive endings: "Ahab's leg" -> "Ahab leg", "the Beatles' song" ->
    "the Beatles song"."""
    return _POSSESSIVE.sub("", text)


def base_word(word: str) -> str:
    """A folded word without its possessive "'s": "ahab's" -> "ahab"."""
    return word[:-2] if word.endswith("'s") else word


def base_words(text: str) -> list[str]:
    """The folded words of ``text`` without possessive endings."""
    return [base_word(w) for w in words(text)]


# --- stop words ----------------------------------------------------------------------------------------


def content_words(text: str) -> list[str]:
    """Words without stop words and possessive endings; falls back to all words if nothing is left."""
    all_words = base_words(text)
    kept = [w for w in all_words if w not in STOPWORDS]
    return kept or all_words


# --- stems ---------------------------------------------------------------------------------------------


def plural_stem(word: str) -> str:
    """Strip an English plural: "galaxies" -> "galaxy", "boxes" -> "box", "emus" -> "emu".

    Words of 3 letters or fewer, words ending in "ss" or "is", 5+ letter words ending in "us", and the
    exceptions (this, less, across, always, towards, ...) are left alone (lower-cased).
    """
    w = word.lower()
    if len(w) <= 3 or w in _PLURAL_EXCEPTIONS or not w.endswith("s") or w.endswith(("ss", "is")):
        return w
    if w.endswith("us") and len(w) >= 5:  # virus, campus, status (but emus, gnus)
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("es") and len(w) > 4 and w[:-2].endswith(_ES_AFTER):
        return w[:-2]
    return w[:-1]


def stem(word: str) -> str:
    """A light stem of a folded word: the first common English suffix that leaves 4+ letters stripped.

    "hunting" -> "hunt", "galaxies" -> "galaxy", "carried" -> "carry", "horses" -> "hors", "quickly" ->
    "quick"; "ring", "emus" and "boxes" ("boxe") keep more than a plural stemmer would.
    """
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


def stems(text: str) -> frozenset[str]:
    """Stems of the content words of ``text`` (memoised per text of at most ``STEMS_CACHED_CHARS``: an ask
    stems the same evidence chunks and sentences many times, and a warm process meets them again)."""
    return _remembered_stems(text) if len(text) <= STEMS_CACHED_CHARS else _stems(text)


def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in content_words(text))


_remembered_stems = functools.lru_cache(maxsize=STEMS_CACHED)(_stems)


def coverage(terms: frozenset[str], text: str) -> float:
    """Share of ``terms`` (stems) found among the stems of ``text``; 0 for no terms."""
    if not terms:
        return 0.0
    return len(terms & stems(text)) / len(terms)


# --- sentences -----------------------------------------------------------------------------------------


def _abbreviated(sentence: str, following: str) -> bool:
    """The span ends in an abbreviation ("Mr.", "Esq.", "Jan." before a number) or a capital initial ("J.")
    that does not end the sentence: an initial followed by a capitalised function word ("U.S.A. That is
    all.") does."""
    match = _ABBREVIATED.search(sentence)
    word = match.group(1) if match else ""
    if word in ABBREVIATIONS or (word in _DATED and following[:1].isdigit()):
        return True
    if len(word) != 1 or not word.isupper():
        return False
    nxt = _FIRST_WORD.match(following)
    return not (nxt and fold(nxt.group(1)) in STOPWORDS)


def _continues(following: str) -> bool:
    """The next span continues the sentence: it opens with a lower-case letter or inner punctuation
    ('"Stop!" cried he.', 'the initials "H. B." were', "Cal., U.S.A.")."""
    first = following[:1]
    return first.islower() or (first != "" and first in _INNER_PUNCTUATION)


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (whitespace trimmed; see the module docstring)."""
    spans: list[tuple[int, int]] = []
    for block in _BLOCK.finditer(text):
        first = True
        opening = len(spans)  # the block's first span: a speaker's label there runs on
        for match in _SENTENCE.finditer(text, block.start(), block.end()):
            start, end = match.span()
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end <= start:
                continue
            if first and spans and text[spans[-1][1] - 1] in _OPEN_ENDINGS:
                spans[-1] = (spans[-1][0], end)  # 'and said to Grethel,' + blank line + '"Be easy..."'
                first = False
                continue
            if not first and spans:
                current = text[start:end]
                previous = text[spans[-1][0] : spans[-1][1]]
                joined = start == spans[-1][1]  # no space: "U.S.A.", "3.5", "?!"
                label = len(spans) - 1 == opening and _SPEAKER.fullmatch(previous) is not None
                if joined or label or _continues(current) or _abbreviated(previous, current):
                    spans[-1] = (spans[-1][0], end)
                    continue
            spans.append((start, end))
            first = False
    return spans


# --- lexical index -------------------------------------------------------------------------------------


def fts_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression that can never be a syntax error: each content word quoted, OR-ed.

    Quotes, ``NEAR(``, ``*``, ``-``, ``AND``, parentheses and punctuation are all reduced to plain
    quoted terms; a query with no word characters gives ``None`` (no hits).
    """
    terms: list[str] = []
    for word in content_words(query):
        for part in _APOSTROPHE.split(word):
            if part and part not in terms:
                terms.append(part)
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


FTS_MAX_PHRASE_TOKENS = 24  # a longer query is no verbatim line: no whole-query phrase
FTS_MAX_SHINGLES = 12  # at most this many 3-word runs are looked up (the first ones of the query)
_QUOTED = re.compile(r'"([^"]+)"|“([^“”]+)”|(?<![^\W_])[‘\'](.+?)[’\'](?![^\W_])')


def fts_tokens(text: str) -> list[str]:
    """The folded words of ``text`` cut at apostrophes, as the FTS5 tokenizer cuts them ("we're" -> "we",
    "re"): the tokens of a phrase that must stand in a chunk in this order."""
    return [part for word in words(text) for part in _APOSTROPHE.split(word) if part]


def fts_phrases(query: str) -> tuple[tuple[str, ...], ...]:
    """Phrases of ``query`` that a chunk holding it verbatim is rewarded for: the whole query (2 to
    ``FTS_MAX_PHRASE_TOKENS`` tokens, stop words included: "Off with her head") and each quoted segment
    of 2+ tokens ("...", “...”, ‘...’ or '...' outside words: "Who said 'we're all mad here'?");
    distinct, in order."""
    found: list[tuple[str, ...]] = []
    whole = tuple(fts_tokens(query))
    if 2 <= len(whole) <= FTS_MAX_PHRASE_TOKENS:
        found.append(whole)
    for match in _QUOTED.finditer(query):
        segment = tuple(fts_tokens(next(g for g in match.groups() if g is not None)))
        if 2 <= len(segment) <= FTS_MAX_PHRASE_TOKENS and segment not in found:
            found.append(segment)
    return tuple(found)


def fts_shingles(query: str) -> tuple[tuple[str, ...], ...]:
    """The query's runs of three consecutive tokens that hold a content word (proximity evidence: "the
    miller's daughter" -> ("miller", "s", "daughter")), distinct, at most ``FTS_MAX_SHINGLES``; none for
    a query of three tokens or fewer (the whole-query phrase covers it)."""
    found = fts_tokens(query)
    out: list[tuple[str, ...]] = []
    if len(found) <= 3:
        return ()
    for i in range(len(found) - 2):
        run = tuple(found[i : i + 3])
        if run not in out and any(t not in STOPWORDS and len(t) > 1 for t in run):
            out.append(run)
            if len(out) >= FTS_MAX_SHINGLES:
                break
    return tuple(out)


def fts_phrase_expression(phrases: tuple[tuple[str, ...], ...]) -> str | None:
    """An FTS5 MATCH expression matching any of ``phrases`` verbatim (each a quoted phrase, OR-ed); safe
    for any tokens of ``fts_tokens`` (never a syntax error); ``None`` for no phrase."""
    quoted = [" ".join(p).replace('"', '""') for p in phrases if p]
    return " OR ".join(f'"{q}"' for q in quoted) or None


_DEFINITIONAL_RE = re.compile(
    r"^\s*(?:what\s+is|what\s+are|what['’]?s|whats|tell\s+me\s+about|"
    r"what['’]?s\s+the\s+deal\s+with|what['’]?s\s+up\s+with)\s+\S",
    re.IGNORECASE,
)


def named_phrases(question: str) -> tuple[str, ...]:
    """Runs of capitalised words (digits may continue a run) in the question, e.g. "Apollo 13".

    The first word only counts when it is not a stop word ("What", "Who"); stop words at either end of
    a run are trimmed ("The Beatles" -> "Beatles"), inner ones kept ("Georgia on My Mind" stays whole
    only where each word is capitalised).
    """
    found = tokens(strip_possessives(question))
    runs: list[list[str]] = []
    current: list[str] = []
    for i, tok in enumerate(found):
        named = tok[0].isupper() or (tok[0].isdigit() and bool(current))
        if i == 0 and fold(tok) in QUESTION_STOPWORDS:
            named = False
        if named:
            current.append(tok)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    phrases: list[str] = []
    for run in runs:
        while run and fold(run[0]) in QUESTION_STOPWORDS:
            run = run[1:]
        while run and fold(run[-1]) in QUESTION_STOPWORDS:
            run = run[:-1]
        if run:
            phrases.append(" ".join(run))
    return tuple(dict.fromkeys(phrases))


def is_definitional(question: str) -> bool:
    """True for "what is X", "what are X", "tell me about X", "what's the deal with X", "what's up with X"."""
    return bool(_DEFINITIONAL_RE.match(question))


_QUANTITY = frozenset(["many", "much", "long", "old", "far", "often"])


_CONCEPTUAL_CUES = frozenset(
    [
        "feel",
        "feels",
        "felt",
        "think",
        "thinks",
        "thought",
        "theme",
        "themes",
        "meaning",
        "mean",
        "means",
        "moral",
        "lesson",
        "lessons",
        "symbol",
        "symbolize",
        "symbolise",
        "represent",
        "represents",
        "significance",
        "significant",
        "purpose",
        "relationship",
        "describe",
        "explain",
        "compare",
        "personality",
        "attitude",
        "learn",
        "learned",
        "learnt",
        "happen",
        "happened",
        "happens",
    ]
)


_QUOTE = re.compile(r"[\"“”]([^\"“”]{3,})[\"“”]")


def question_kind(question: str) -> str:
    """ "concrete" or "conceptual": the book flow's search order rule (documented in
    ``nodes/query/book_flow.py``)."""
    text = question.strip()
    ws = words(text)
    if not ws:
        return "concrete"
    rest = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
    if _QUOTE.search(text) or any(ch.isdigit() for ch in text) or re.search(r"\b[A-Z][a-z]+", rest):
        return "concrete"
    first = ws[0]
    if first == "why" or (first == "how" and (len(ws) < 2 or ws[1] not in _QUANTITY)):
        return "conceptual"
    if any(w in _CONCEPTUAL_CUES for w in ws):
        return "conceptual"
    return "concrete"


def truncate(text: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, cut back to the last space when that keeps over half."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text.strip()
    cut = text[: max_chars + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else text[:max_chars]).strip()
