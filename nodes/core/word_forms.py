"""Word forms the reader and the evidence rules match: irregular forms read as their base.

A question asks "What did the king send?" of a text that says "the king sent", "Why did Mittens fall?"
of "she fell": ``irregular_base`` gives a form's base ("told" -> "tell", "mice" -> "mouse") and
``FORM_STEMS`` a base's stem with the stems of all its forms ("fall" -> fall, fell, fallen), ``lemma`` a
word's light stem with an irregular form read as its base (what the reader and the subject rule match
a question's words by). The regular
forms are matched by light stems and ``sentence_scoring._other_forms``.

``spelling_variant``: two spellings of one word ("recognise" / "recognize", "colour" / "color"), which a
slip respelling may join although both are real words.

``name_spellings``: a question's name as a book may also write it (two words as one, "Redheaded League";
a month abbreviated, "Jan. 1st"; the table is ``text.MONTH_ABBREVIATIONS``), for the name rule
(``ranking.missing_names``).

``asked_frame``: the words of how a question is asked, which neither the evidence rule nor the reader
looks for in a passage (``unframed``): the "kind" of "What kind of things ...?" and an adverb of
frequency ("often").

Config keys: none. Limitations: English; a word list, not a morphological analyser.
"""

from __future__ import annotations

import re

from folio.nodes.core.text import MONTH_ABBREVIATIONS, content_words, stem

# irregular forms read as their base ("told" -> "tell", "mice" -> "mouse"): a question asks "What did
# the king send?" of a text that says "the king sent"; each line is a base word and its forms
IRREGULAR_TEXT = """
    arise arose arisen
    awake awoke awoken
    bear bore borne born
    beat beaten
    become became
    begin began begun
    bend bent
    bid bade
    bind bound
    bite bit bitten
    bleed bled
    blow blew blown
    break broke broken
    breed bred
    bring brought
    build built
    burn burnt
    buy bought
    catch caught
    choose chose chosen
    cling clung
    come came
    creep crept
    deal dealt
    dig dug
    draw drew drawn
    dream dreamt
    drink drank drunk
    drive drove driven
    dwell dwelt
    eat ate eaten
    fall fell fallen
    feed fed
    feel felt
    fight fought
    find found
    flee fled
    fling flung
    fly flew flown
    forbid forbade forbidden
    forget forgot forgotten
    forgive forgave forgiven
    freeze froze frozen
    get got gotten
    give gave given
    go went gone
    grow grew grown
    hang hung
    hear heard
    hide hid hidden
    hold held
    keep kept
    kneel knelt
    know knew known
    lay laid
    lead led
    leap leapt
    leave left
    lend lent
    lie lain
    light lit
    lose lost
    make made
    mean meant
    meet met
    pay paid
    ride rode ridden
    ring rang rung
    rise rose risen
    run ran
    say said
    see saw seen
    seek sought
    sell sold
    send sent
    shake shook shaken
    shine shone
    shoot shot
    shrink shrank shrunk
    sing sang sung
    sink sank sunk
    sit sat
    slay slew slain
    sleep slept
    slide slid
    sling slung
    speak spoke spoken
    spend spent
    spin spun
    spring sprang sprung
    stand stood
    steal stole stolen
    stick stuck
    sting stung
    stride strode
    strike struck stricken
    string strung
    strive strove striven
    swear swore sworn
    sweep swept
    swell swollen
    swim swam swum
    swing swung
    take took taken
    teach taught
    tear tore torn
    tell told
    think thought
    throw threw thrown
    tread trod trodden
    understand understood
    wake woke woken
    wear wore worn
    weave wove woven
    weep wept
    win won
    wring wrung
    write wrote written
    child children
    man men
    woman women
    mouse mice
    goose geese
    foot feet
    tooth teeth
"""
IRREGULAR = {
    form: line.split()[0] for line in IRREGULAR_TEXT.strip().splitlines() for form in line.split()[1:]
}


def irregular_base(word: str) -> str | None:
    """The base of an irregular form ("wrote" -> "write"), None for any other word."""
    return IRREGULAR.get(word)


def lemma(word: str) -> str:
    """A word's light stem, an irregular form read as its base ("sent" -> "send", "mice" -> "mouse")."""
    return stem(IRREGULAR.get(word, word))


# a base word's stem -> the stems of it and its irregular forms ("fall" -> fall, fell, fallen)
FORM_STEMS = {
    stem(line.split()[0]): frozenset(stem(w) for w in line.split())
    for line in IRREGULAR_TEXT.strip().splitlines()
}


FRAME = re.compile(r"\b(?:what|which)\s+(kinds?|sorts?|types?)\s+of\b", re.IGNORECASE)
FREQUENCY = frozenset(lemma(w) for w in ("often", "always", "usually", "sometimes", "frequently"))
# a quantifier the question asks with, which a passage that answers may say otherwise ("How did the Queen
# settle every difficulty?" / "The Queen had only one way of settling all difficulties": the evidence
# rule's coverage need not find it; the reader still counts it: "Every day they made several journeys");
# "each", "all", "any" are stopwords already
QUANTIFIERS = frozenset(lemma(w) for w in ("every", "ever"))


def asked_frame(question: str) -> frozenset[str]:
    """The stems (``lemma``) of how a question is asked, which a passage that answers need not say: the
    "kind" of "What kind of things ...?" and an adverb of frequency ("often": "What kind of things often
    disappeared at night?" is answered by "... things disappeared at night-- especially cheese and
    bacon")."""
    found = FRAME.search(question)
    framed = {lemma(found.group(1).lower())} if found else set()
    return frozenset(framed | ({lemma(w) for w in content_words(question)} & FREQUENCY))


def unframed(terms: frozenset[str], question: str) -> frozenset[str]:
    """``terms`` (the question's stems) without how it is asked (``asked_frame``), unless nothing else is
    asked ("How often?" keeps its word): what the evidence rule and the reader look for in a passage."""
    return (terms - asked_frame(question)) or terms


def spelling_variant(asked: str, own: str) -> bool:
    """Whether ``asked`` and ``own`` are one word in British and American spelling: "s" for "z"
    ("recognise" / "recognize") or "our" for "or" ("colour" / "color"). A slip respelling joins two
    such real words; any other real word asked is no slip ("scare" is not "scarce")."""
    a, b = asked.lower(), own.lower()
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        return len(differ) == 1 and {a[differ[0]], b[differ[0]]} == {"s", "z"}
    return a != b and a.replace("our", "or") == b.replace("our", "or")


def name_spellings(name: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """A name as written, with two neighbouring words written as one ("Red Headed League" is also
    "Redheaded League": a hyphenated compound a book spells closed), and with a month abbreviated
    ("January 1st" is also "Jan 1st")."""
    joined = [(*name[:i], name[i] + name[i + 1].lower(), *name[i + 2 :]) for i in range(len(name) - 1)]
    short = [
        (*name[:i], short, *name[i + 1 :])
        for i, word in enumerate(name)
        for short in MONTH_ABBREVIATIONS.get(word.lower(), ())
    ]
    return (name, *joined, *short)
