"""Pronouns standing for the question's names: "he" after "said the Swallow".

Purpose: the reader (``reading._unit_scores``) scores a sentence by the question's words it holds. A
story names its character once and then says "he" or "she": "'I will stay with you always,' said the
Swallow, and he slept at the Prince's feet. All the next day he sat on the Prince's shoulder, and told him
stories ..." answers "What did the Swallow tell the Happy Prince when sitting on his shoulder?" in its
second sentence, which never says "Swallow". ``credited`` lets such a sentence count the name its
predecessor holds, when:

- it opens with "he" or "she" among its first ``SUBJECT_WORDS`` words, with no name or quotation before
  it (``subject_pronoun``: "But--seated upon the stump, she was startled ...");
- the sentence before it names the name as its subject, as far as word order tells (``subject_mention``:
  in its first clause with no pronoun, preposition or verb of speech before it, or after a verb of speech,
  "said the Swallow"; not "But he found Lydia absolutely resolved", whose "she" after it is Lydia but
  whose subject is Darcy, nor "The king said to the miller"), and the sentence itself does not name it; or
  the sentence before stood for the name in this way itself (a run of "she ... And she waddled into the
  kitchen and got two onions");
- exactly one such name agrees with the pronoun (``genders``: the first subject pronoun after each mention
  of the name in its sentence votes, "they" among them, a possessive mention not ("the miller's daughter
  ... she" is the daughter), and one gender needs twice the other votes): the Swallow is "he" in Wilde,
  the match-girl "she", so "She has let her matches fall" is not the Swallow's sentence; "the two Bad
  Mice,--but they were not so very naughty" makes the mice no "he".

A paragraph's first sentence may stand for the name the paragraph before ends with (``CROSS_PARAGRAPH``:
"All the next day he sat ..." opens a paragraph).

Measured (``python -m bench.question_sets``, no LLM, 2026-12-08): FairytaleQA dev first citation 0.715 ->
0.725; the other development sets unchanged answer by answer; books27_test "What did Peter Rabbit lose in
Mr. McGregor's garden?" now answered ("He lost one of his shoes among the cabbages"). Not crossing
paragraphs: FairytaleQA dev first citation 0.71. The reader leaves it off for "why" questions
(``reading.PRONOUN_SKIPS``).

Config keys: none. Limitations: English pronouns; names only (the question's capitalised runs, not "the
nurse"); subject and gender are read from word order and the sentences at hand, not parsed (the pronoun
after a mention may be another character's); a name said with no pronoun after it gets no credit; "they"
and "it" are not resolved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CROSS_PARAGRAPH = True  # a paragraph's first sentence may stand for a name the paragraph before ends with
_WORD = re.compile(r"[A-Za-z]+")
SUBJECT_WORDS = 8  # a sentence's subject pronoun is among its first words
_QUOTES = '“”"‘'
_CLAUSE_END = re.compile(r"[,;:—–(“”\"]|\s-\s")


def subject_pronoun(text: str) -> str | None:
    """The gender, "m" or "f", when "he" or "she" is among the sentence's first ``SUBJECT_WORDS`` words
    with no capitalised word but the first and no quotation before it ("After they had gone he felt
    lonely" and "But--seated upon the stump, she was startled" → a pronoun; "'I will stay,' said the
    Swallow, and he slept" → None: the Swallow is the subject)."""
    quoted = min(
        (i for i in map(text.find, _QUOTES) if i >= 0), default=len(text)
    )  # the first quotation mark
    for n, found in enumerate(_WORD.finditer(text)):
        word = found.group(0)
        folded = word.lower()
        if n >= SUBJECT_WORDS or quoted < found.start():
            return None
        if folded in ("he", "she"):
            return "m" if folded == "he" else "f"
        if n > 0 and word[0].isupper() and folded != "i":
            return None
    return None


SUBJECTS = {"he": "m", "himself": "m", "she": "f", "herself": "f", "they": "p", "themselves": "p"}
# words that make a later name no subject: another subject ("But he found Lydia"), a preposition or a verb
# of speech ("The king said to the miller")
_BEFORE_SUBJECT = frozenset(["he", "she", "they", "i", "we", "you", "it"])
_BEFORE_SUBJECT |= frozenset(["to", "of", "with", "at", "in", "on", "from", "by", "for", "into", "upon"])
_BEFORE_SUBJECT |= frozenset(["about", "after", "said", "asked", "told", "cried", "replied", "answered"])
_SPEECH = (
    r"\b(?:said|says|cried|asked|replied|answered|exclaimed|thought|called|shouted|whispered|murmured)"
    r"\s+(?:(?:the|old|little|poor)\s+)*"
)


def _following_pronoun(text: str, head: str) -> str | None:
    """ "m", "f" or "p" (plural): the first subject or reflexive pronoun after the name's ``head`` word in
    the same sentence ("said the Swallow, and he slept"; "Hans found himself"; "the two Bad Mice,--but
    they were"); None without one. An object pronoun is left out: "Lydia was fond of him" says nothing
    of Lydia; nor a possessive mention: "the miller's daughter ... she" is the daughter."""
    found = re.search(rf"\b{re.escape(head)}\b(?!['’](?:s\b|\s))", text, re.IGNORECASE)
    if found is None:
        return None
    for word in _WORD.findall(text[found.end() :]):
        gender = SUBJECTS.get(word.lower())
        if gender is not None:
            return gender
    return None


def subject_mention(text: str, head: str) -> bool:
    """Whether the sentence names ``head`` as its subject, as far as word order tells: in its first clause
    with no pronoun, preposition or verb of speech before it ("Lydia was exceedingly fond of him"; not
    "But he found Lydia resolved" nor "The king said to the miller"), or after a verb of speech ("'I will
    stay with you always,' said the Swallow")."""
    if re.search(_SPEECH + re.escape(head) + r"\b", text, re.IGNORECASE):
        return True
    first = _CLAUSE_END.split(text.lstrip(" \"'“‘"), maxsplit=1)[0]
    found = re.search(rf"\b{re.escape(head)}\b", first, re.IGNORECASE)
    return found is not None and not any(
        w.lower() in _BEFORE_SUBJECT for w in _WORD.findall(first[: found.start()])
    )


def genders(holds: Sequence[Sequence[bool]], texts: Sequence[str], heads: Sequence[str]) -> list[str | None]:
    """Each name's gender, "m" or "f", or None: ``holds[n][i]`` says whether text ``i`` names name ``n``,
    ``heads[n]`` is its last word; each text naming it votes with the first pronoun after the name
    (``_following_pronoun``: "said the Swallow, and he slept" is "m"; "the two Bad Mice,--but they
    were" is plural), and a gender needs twice the other votes."""
    out: list[str | None] = []
    for held, head in zip(holds, heads, strict=True):
        votes = {"m": 0, "f": 0, "p": 0}
        for i, h in enumerate(held):
            vote = _following_pronoun(texts[i], head) if h else None
            if vote is not None:
                votes[vote] += 1
        best = max(("m", "f"), key=lambda g: votes[g])
        others = sum(votes.values()) - votes[best]
        out.append(best if votes[best] >= 1 and votes[best] >= 2 * others else None)
    return out


def credited(
    found: Sequence[frozenset[str]],
    texts: Sequence[str],
    opens: Sequence[bool],
    names: Sequence[tuple[frozenset[str], str]],
) -> list[frozenset[str]]:
    """``found`` (the question's stems each consecutive text holds) with the stems of the one name a
    pronoun-led text stands for added (module docstring); ``opens[i]``: text ``i`` opens a paragraph;
    ``names``: the stems and the last word of each of the question's names."""
    out = list(found)
    if not names:
        return out
    holds = [[stems <= f for f in found] for stems, _ in names]
    gender = genders(holds, texts, [head for _, head in names])
    carried: int | None = None  # the name the sentence before stood for through its own pronoun
    for i in range(1, len(texts)):
        pronoun = subject_pronoun(texts[i])
        if pronoun is None or (not CROSS_PARAGRAPH and i < len(opens) and opens[i]):
            carried = None
            continue
        meant = [
            n
            for n, (_, head) in enumerate(names)
            if not holds[n][i]
            and gender[n] == pronoun
            and (n == carried or (holds[n][i - 1] and subject_mention(texts[i - 1], head)))
        ]
        carried = meant[0] if len(meant) == 1 else None
        if carried is not None:
            out[i] = out[i] | names[carried][0]
    return out
