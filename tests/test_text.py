"""The one text toolkit: tokens, folding, possessives, stop words, stems, sentences and FTS expressions."""

from __future__ import annotations

import pytest

from folio.nodes.core.text import (
    ABBREVIATIONS,
    NAME_WORD,
    QUESTION_STOPWORDS,
    STOPWORDS,
    TITLE_ABBREVIATIONS,
    base_word,
    base_words,
    content_words,
    coverage,
    fold,
    fts_match_expression,
    plural_stem,
    sentences,
    stem,
    stems,
    strip_html,
    strip_possessives,
    tokens,
    word_spans,
    words,
)


def split(text: str) -> list[str]:
    return [text[s:e] for s, e in sentences(text)]


# --- tokens ------------------------------------------------------------------------------------------


def test_fold_lowers_strips_accents_and_unifies_apostrophes():
    assert fold("Café NAÏVE Ahab’s Ærø") == "cafe naive ahab's ærø"


def test_words_fold_case_accents_and_apostrophes():
    assert words("Café — Ahab’s WHALE!") == ["cafe", "ahab's", "whale"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("don't stop", ["don't", "stop"]),
        ("o'clock, rock 'n' roll", ["o'clock", "rock", "n", "roll"]),
        ("the Beatles' song", ["the", "beatles", "song"]),  # a trailing apostrophe is not a word character
        ("snake_case 3.5 km", ["snake", "case", "3", "5", "km"]),
        ("Zürich – São Paulo", ["zurich", "sao", "paulo"]),
        ("Москва и Київ", ["москва", "и", "киів"]),  # accents folded: ї -> і
        ("<b>Emu</b>", ["b", "emu", "b"]),  # markup is text to ``words``: strip it first
        ("", []),
    ],
)
def test_words_golden_cases(text: str, expected: list[str]):
    assert words(text) == expected


def test_tokens_keep_the_words_as_written():
    assert tokens("The Beatles’ song, Ahab's Café") == ["The", "Beatles", "song", "Ahab's", "Café"]


def test_word_spans_give_folded_words_with_offsets_into_the_original():
    text = "Ahab’s  Café!"
    spans = word_spans(text)
    assert spans == [("ahab's", 0, 6), ("cafe", 8, 12)]
    assert [text[s:e] for _, s, e in spans] == ["Ahab’s", "Café"]


def test_strip_html_removes_tags_and_decodes_entities():
    assert strip_html("<i>Emu</i> &amp; <a href='x'>kin</a>") == "Emu & kin"
    assert words(strip_html("<b>Emu</b>")) == ["emu"]


def test_name_word_joins_hyphens_and_apostrophes_but_never_digits():
    found = NAME_WORD.findall("The Pequod Meets the Rose-Bud; O'Brien in 1851, R2D2")
    assert found == ["The", "Pequod", "Meets", "the", "Rose-Bud", "O'Brien", "in", "R", "D"]


# --- possessives -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ahab's leg", "Ahab leg"),
        ("Ahab’s leg", "Ahab leg"),
        ("the Beatles' song", "the Beatles song"),
        ("James's hat", "James hat"),
        ("it's late", "it late"),  # a contraction of "is" looks like a possessive
        ("don't", "don't"),
        ("the boss' desk", "the boss desk"),
    ],
)
def test_strip_possessives_golden_cases(text: str, expected: str):
    assert strip_possessives(text) == expected


def test_base_words_drop_the_possessive_s_of_folded_words():
    assert base_word("ahab's") == "ahab"
    assert base_word("o'clock") == "o'clock"
    assert base_words("Ahab’s WHALE's tail") == ["ahab", "whale", "tail"]


# --- stop words --------------------------------------------------------------------------------------


def test_stopwords_hold_function_words_and_contractions_but_not_content():
    assert {"the", "what", "is", "don't", "it's", "said", "tell"} <= STOPWORDS
    assert not {"whale", "happened", "called", "known", "one", "like"} & STOPWORDS


def test_question_stopwords_add_how_questions_are_asked():
    asked = {"happened", "called", "known", "thing", "like", "one", "the", "what", "it's"}
    assert asked <= QUESTION_STOPWORDS
    title_words = {w for w in STOPWORDS if w.endswith("n't")} | {"say", "said", "says"}
    assert title_words == STOPWORDS - QUESTION_STOPWORDS  # "What'd I Say", "I Can't Stop Loving You"


def test_content_words_drop_stop_words_and_possessives():
    assert content_words("What is Ahab's leg made of?") == ["ahab", "leg", "made"]


def test_content_words_keep_all_words_when_only_stop_words():
    assert content_words("what is it") == ["what", "is", "it"]


# --- stems -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("galaxies", "galaxy"),
        ("Galaxy", "galaxy"),
        ("boxes", "box"),
        ("churches", "church"),
        ("horses", "horse"),
        ("emus", "emu"),
        ("ties", "tie"),
        ("gas", "gas"),
        ("virus", "virus"),
        ("analysis", "analysis"),
        ("glass", "glass"),
        ("this", "this"),
        ("towards", "towards"),
        ("hunting", "hunting"),  # plurals only
        ("wolves", "wolve"),  # irregular plurals are not known
    ],
)
def test_plural_stem_golden_cases(word: str, expected: str):
    assert plural_stem(word) == expected


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("hunting", "hunt"),
        ("hunted", "hunt"),
        ("hunts", "hunt"),
        ("galaxies", "galaxy"),
        ("carried", "carry"),
        ("studied", "study"),
        ("quickly", "quick"),
        ("knowingly", "know"),
        ("churches", "church"),
        ("horses", "hors"),  # unlike ``plural_stem``: "horse" stays "horse"
        ("boxes", "boxe"),
        ("emus", "emus"),  # fewer than four letters would remain
        ("ring", "ring"),
        ("bed", "bed"),
        ("mice", "mice"),
    ],
)
def test_stem_golden_cases(word: str, expected: str):
    assert stem(word) == expected


def test_stems_are_the_stems_of_the_content_words():
    assert stems("The hunters were hunting the wolf's horses") == {"hunter", "hunt", "wolf", "hors"}


def test_coverage_is_the_share_of_terms_found_in_the_text():
    terms = stems("hunting wolves at dawn")
    assert coverage(terms, "A wolf was hunted.") == pytest.approx(1 / 3)
    assert coverage(terms, "Hunters hunt wolves at dawn.") == 1.0
    assert coverage(terms, "nothing here") == 0.0
    assert coverage(frozenset(), "anything") == 0.0


# --- sentences ---------------------------------------------------------------------------------------


def test_sentences_give_trimmed_spans():
    text = "Call me Ishmael.  Some years ago — never mind how long! Whale?"
    assert split(text) == ["Call me Ishmael.", "Some years ago — never mind how long!", "Whale?"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Mr. and Mrs. Dursley lived at No. 4. They were proud.",
            ["Mr. and Mrs. Dursley lived at No. 4.", "They were proud."],
        ),
        ("Dr. Watson met St. Clair. He left.", ["Dr. Watson met St. Clair.", "He left."]),
        ("John Smith, Esq., wrote it. Then he slept.", ["John Smith, Esq., wrote it.", "Then he slept."]),
        ("J. R. R. Tolkien wrote books. Many.", ["J. R. R. Tolkien wrote books.", "Many."]),
        ("Capt. Ahab and Prof. Moriarty met.", ["Capt. Ahab and Prof. Moriarty met."]),
        (
            "They recorded Sgt. Pepper's Lonely Hearts Club Band in 1967. It sold well.",
            ["They recorded Sgt. Pepper's Lonely Hearts Club Band in 1967.", "It sold well."],
        ),
        (
            "Col. Moran, Gen. Gordon and Lt. Dunn met Rev. Small, Hon. Ellis and Fr. Brown. They ate.",
            ["Col. Moran, Gen. Gordon and Lt. Dunn met Rev. Small, Hon. Ellis and Fr. Brown.", "They ate."],
        ),
        ("He said no. Then he left.", ["He said no.", "Then he left."]),  # lower-case "no." ends one
        # a month abbreviated before a number (Potter's Ginger and Pickles); before a word it ends one
        (
            "When it came to Jan. 1st there was still no money. It was Mar. 3 then.",
            ["When it came to Jan. 1st there was still no money.", "It was Mar. 3 then."],
        ),
        ("It ended in Sept. He left.", ["It ended in Sept.", "He left."]),
        # a play's speaker opening a paragraph (Flatland's dialogue) is no sentence of its own
        (
            "SPHERE. Well, then, I cannot. Would you?\n\nI. But my Lord has shewn me.\n\nI. Nay.",
            ["SPHERE. Well, then, I cannot.", "Would you?", "I. But my Lord has shewn me.", "I. Nay."],
        ),
        ("PREFACE.\n\nIt begins. SPHERE. Not here.", ["PREFACE.", "It begins.", "SPHERE.", "Not here."]),
        ("Wow!!! Really?! Yes...", ["Wow!!!", "Really?!", "Yes..."]),
        ("No final stop", ["No final stop"]),
        ("", []),
    ],
)
def test_sentences_do_not_end_at_abbreviations_or_initials(text: str, expected: list[str]):
    assert split(text) == expected


def test_sentences_keep_closing_quotes_and_brackets_with_their_sentence():
    text = '"I can\'t," said Tom. "Why not?" (It was late.) Next.'
    assert split(text) == ['"I can\'t," said Tom.', '"Why not?"', "(It was late.)", "Next."]


def test_dialogue_tags_stay_with_the_speech_they_follow():
    assert split('"Stop!" cried he. She ran.') == ['"Stop!" cried he.', "She ran."]
    assert split("'Who is there?' asked the wolf. 'It is I,' said the kid.") == [
        "'Who is there?' asked the wolf.",
        "'It is I,' said the kid.",
    ]


def test_a_question_inside_dialogue_followed_by_a_capital_ends_a_sentence():
    assert split("“I have it! It has happened before.”") == ["“I have it!", "It has happened before.”"]


# Golden cases from the real books (Sherlock Holmes, Grimm, Moby-Dick, Alice, Potter).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The letter was superscribed to “Sherlock Holmes, Esq. To be left till called for.” My friend "
            "tore it open.",
            [
                "The letter was superscribed to “Sherlock Holmes, Esq. To be left till called for.”",
                "My friend tore it open.",
            ],
        ),
        (
            "the daughter of Aloysius Doran, Esq., of San Francisco, Cal., U.S.A. That is all.",
            ["the daughter of Aloysius Doran, Esq., of San Francisco, Cal., U.S.A.", "That is all."],
        ),
        (
            "The initials “H. B.” were scrawled upon one side. It was pierced in the brim.",
            ["The initials “H. B.” were scrawled upon one side.", "It was pierced in the brim."],
        ),
        (
            "“Mr. Holmes, you are a wonder!” said Mr. Wilson. Dr. Watson laughed.",
            ["“Mr. Holmes, you are a wonder!” said Mr. Wilson.", "Dr. Watson laughed."],
        ),
        ('"Come here," said he. "Now!"', ['"Come here," said he.', '"Now!"']),
        (
            'And said, "Table, be covered!" all at once the table had a cloth on it. He was glad.',
            ['And said, "Table, be covered!" all at once the table had a cloth on it.', "He was glad."],
        ),
        (
            "“Out of the way, Commodore!” cried one. “Hard down with your tail, there!” cried a second.",
            ["“Out of the way, Commodore!” cried one.", "“Hard down with your tail, there!” cried a second."],
        ),
        (
            "the Quog Whale; the Blue Whale; etc. From Icelandic authorities.",
            ["the Quog Whale; the Blue Whale; etc.", "From Icelandic authorities."],
        ),
        ("It weighed 3.5 tons. Then it sank.", ["It weighed 3.5 tons.", "Then it sank."]),
        (
            "THE FROG-PRINCE\n\nOne fine evening a young princess went into a wood.",
            ["THE FROG-PRINCE", "One fine evening a young princess went into a wood."],
        ),
        (
            'Then he went back again, and said to Grethel,\n\n"Be easy, dear little sister." And he slept.',
            [
                'Then he went back again, and said to Grethel,\n\n"Be easy, dear little sister."',
                "And he slept.",
            ],
        ),
    ],
)
def test_sentences_golden_cases_from_the_books(text: str, expected: list[str]):
    assert split(text) == expected


def test_title_abbreviations_are_abbreviations():
    assert TITLE_ABBREVIATIONS < ABBREVIATIONS
    assert {"Mr", "Mrs", "Dr", "St", "Sgt", "Capt", "Col", "Gen", "Lt", "Rev", "Prof", "Hon", "Fr"} <= (
        TITLE_ABBREVIATIONS
    )
    assert {"Esq", "No", "vs"} <= ABBREVIATIONS - TITLE_ABBREVIATIONS


# --- lexical index -----------------------------------------------------------------------------------


def test_fts_expression_ors_the_quoted_content_words():
    assert fts_match_expression("What is Ahab's whale?") == '"ahab" OR "whale"'
    assert fts_match_expression("o'clock o'clock") == '"o" OR "clock"'


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "NEAR(whale", "whale*", "-whale", "whale AND", "ahab)", "^col:x", "a OR NOT b"],
)
def test_fts_expression_quotes_every_term(query):
    expression = fts_match_expression(query)
    assert expression is not None
    for term in expression.split(" OR "):
        assert term.startswith('"') and term.endswith('"') and '"' not in term[1:-1]


@pytest.mark.parametrize("query", ["", "   ", "?!.,;", "***", "()", "((", "'"])
def test_fts_expression_is_none_without_words(query):
    assert fts_match_expression(query) is None


def test_stems_are_remembered_for_short_texts_only():
    from folio.nodes.core import text as text_module

    short = "The hunters were hunting the wolf's horses in a short remembered line"
    long = "hunting wolves " * (text_module.STEMS_CACHED_CHARS // 10)
    before = text_module._remembered_stems.cache_info()
    assert stems(short) == text_module._stems(short) == stems(short)
    assert stems(long) == {"hunt", "wolv"}
    after = text_module._remembered_stems.cache_info()
    assert after.hits - before.hits == 1 and after.misses - before.misses == 1
    assert after.currsize - before.currsize <= 1  # the long text is never held
