"""Pure text utilities shared by stages (not a node module: never passed to a driver).

Word tokenisation, an English stop-word list, sentence splitting with offsets, and the safe FTS5
MATCH expression builder used by the lexical index.
"""

from __future__ import annotations

import re
import unicodedata

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "will",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "tell",
        "does",
        "did",
        "say",
        "said",
        "says",
    ]
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"'”’)\]]*|$)", re.UNICODE)


def fold(text: str) -> str:
    """Lower-case, strip accents, unify apostrophes."""
    text = unicodedata.normalize("NFKD", text.replace("’", "'"))
    return "".join(ch for ch in text if not unicodedata.combining(ch)).lower()


def words(text: str) -> list[str]:
    """Folded word tokens (letters and digits; inner apostrophes kept)."""
    return _WORD.findall(fold(text))


def content_words(text: str) -> list[str]:
    """Words without stop words and possessive endings; falls back to all words if nothing is left."""
    all_words = [w[:-2] if w.endswith("'s") else w for w in words(text)]
    kept = [w for w in all_words if w not in STOPWORDS]
    return kept or all_words


def fts_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression that can never be a syntax error: each content word quoted, OR-ed.

    Quotes, ``NEAR(``, ``*``, ``-``, ``AND``, parentheses and punctuation are all reduced to plain
    quoted terms; a query with no word characters gives ``None`` (no hits).
    """
    terms: list[str] = []
    for word in content_words(query):
        for part in re.split(r"['’]", word):
            if part and part not in terms:
                terms.append(part)
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (whitespace trimmed)."""
    spans = []
    for match in _SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans
