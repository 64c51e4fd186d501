"""The pronoun a sentence opens with stands for the one name of the sentence before that agrees with it."""

from __future__ import annotations

import pytest

from folio.nodes.core.pronouns import credited, genders, subject_mention, subject_pronoun

SWALLOW = (frozenset({"swallow"}), "Swallow")
PRINCE = (frozenset({"happy", "prince"}), "Prince")
GIRL = (frozenset({"match", "girl"}), "girl")
MICE = (frozenset({"two", "bad", "mouse"}), "Mice")


@pytest.mark.parametrize(
    ("text", "pronoun"),
    [
        ("All the next day he sat on the Prince's shoulder, and told him stories.", "m"),
        ("After they had gone he felt lonely, and began to tire of his lady-love.", "m"),
        ("Then she went in perfect silence out at the door.", "f"),
        ('"I will stay with you always," said the Swallow, and he slept at the Prince\'s feet.', None),
        ("They all flew away.", None),
        ("The Swallow said nothing, and he flew away.", None),  # "he" past the first clause
        ("Shepherds came by.", None),  # a word that starts with "she"
        ("But--seated upon the stump, she was startled to find a gentleman.", "f"),
        ("When Peter saw the cat he ran.", None),  # Peter is the subject
    ],
)
def test_the_first_clause_says_he_or_she(text, pronoun) -> None:
    assert subject_pronoun(text) == pronoun


def test_a_names_gender_is_the_pronoun_after_its_mentions() -> None:
    texts = [
        "The Swallow flew over the city, and he saw the rich making merry.",
        "He flew on.",
        "The little match-girl stood in the square, and she had no shoes.",
        "She has let her matches fall in the gutter, and they are all spoiled.",
        "The Reed made a curtsey.",
        "So that is the story of the two Bad Mice,--but they were not so very naughty, because Tom paid.",
        "He found a crooked sixpence under the hearth-rug.",
    ]
    holds = [
        [True, False, False, False, False, False, False],  # the Swallow: "he" after him
        [False, False, True, False, False, False, False],  # the match-girl: "she"
        [False, False, False, False, True, False, False],  # the Reed: no pronoun after it
        [False, False, False, False, False, True, False],  # the mice: "they", though "He" follows
    ]
    assert genders(holds, texts, ["Swallow", "girl", "Reed", "Mice"]) == ["m", "f", None, None]


def _found(texts, names):
    return [frozenset(s for n, _ in names for s in n if all(w in t.lower() for w in n)) for t in texts]


def test_the_pronoun_counts_the_one_name_before_it_that_agrees() -> None:
    texts = [
        "The Swallow was tired, and he was cold, and he wished for Egypt.",
        '"I will stay with you always," said the Swallow, and he slept at the Prince\'s feet.',
        "All the next day he sat on the Prince's shoulder, and told him stories of strange lands.",
    ]
    found = _found(texts, [SWALLOW])
    assert found[2] == frozenset()
    out = credited(found, texts, [False] * 3, [SWALLOW, PRINCE])
    assert out[2] == SWALLOW[0]
    assert out[:2] == found[:2]


def test_a_pronoun_stands_for_the_name_of_its_own_gender() -> None:
    texts = [
        "The Swallow flew down, and he saw the little match-girl; she was crying, and she had no shoes.",
        "He flew away.",
        "She has let her matches fall in the gutter.",
    ]
    names = [SWALLOW, GIRL]
    found = _found(texts, names)
    out = credited(found, texts, [False] * 3, names)
    # the first pronoun after "the Swallow" is "he", after "the little match-girl" "she": the sentence
    # before "He" names both, and only the Swallow is "he"
    assert out[1] == SWALLOW[0]
    assert out[2] == frozenset()  # the sentence before "She" names no one


def test_two_names_of_one_gender_before_the_pronoun_leave_it_alone() -> None:
    texts = [
        "The Swallow and the Prince were sad, and he wept.",
        "He looked down at the city.",
    ]
    names = [SWALLOW, (frozenset({"prince"}), "Prince")]
    found = _found(texts, names)
    assert credited(found, texts, [False, False], names)[1] == frozenset()


def test_a_new_paragraph_is_read_on_only_when_crossing_is_allowed(monkeypatch) -> None:
    import folio.nodes.core.pronouns as pronouns

    texts = ["The Swallow was tired, and he was cold, and he slept.", "All the next day he sat there."]
    found = _found(texts, [SWALLOW])
    assert credited(found, texts, [False, True], [SWALLOW])[1] == SWALLOW[0]
    monkeypatch.setattr(pronouns, "CROSS_PARAGRAPH", False)
    assert credited(found, texts, [False, True], [SWALLOW])[1] == frozenset()


def test_a_plural_name_is_no_he() -> None:
    texts = [
        "So that is the story of the two Bad Mice,--but they were not so very naughty after all.",
        "He found a crooked sixpence under the hearth-rug.",
    ]
    found = _found(texts, [MICE])
    assert credited(found, texts, [False, False], [MICE])[1] == frozenset()


@pytest.mark.parametrize(
    ("text", "head", "subject"),
    [
        ("Lydia was exceedingly fond of him.", "Lydia", True),
        ("But he found Lydia absolutely resolved on remaining where she was.", "Lydia", False),
        (
            '"I will stay with you always," said the Swallow, and he slept at the Prince\'s feet.',
            "Swallow",
            True,
        ),
        ("This Mrs. Younge was, he knew, intimately acquainted with Wickham.", "Wickham", False),
        ("Mr. Wickham's adieus were much more affectionate than his wife's.", "Wickham", True),
        ('The king said to the miller, "That is an art that pleases me well."', "miller", False),
        ("THERE was once a miller who was poor, but he had one beautiful daughter.", "miller", True),
    ],
)
def test_the_name_before_the_pronoun_is_the_subject_by_word_order(text, head, subject) -> None:
    assert subject_mention(text, head) is subject


def test_a_name_seen_as_an_object_lends_the_pronoun_nothing() -> None:
    # Pride and Prejudice: "She" is Lydia, but "he found Lydia" has Darcy for its subject
    lydia = (frozenset({"lydia"}), "Lydia")
    texts = [
        "Lydia was sure of it, and she said so.",
        "But he found Lydia absolutely resolved on remaining where she was.",
        "She cared for none of her friends.",
    ]
    found = _found(texts, [lydia])
    assert credited(found, texts, [False] * 3, [lydia])[2] == frozenset()


def test_a_run_of_sentences_opening_with_she_keeps_her_name() -> None:
    # The Tale of Jemima Puddle-duck: the sentence that answers is the second "she" after the name
    jemima = (frozenset({"jemima"}), "Jemima")
    texts = [
        "Jemima Puddle-duck went on, and she came to the farm.",
        "She went round the farm garden, nibbling off snippets of herbs.",
        "And she waddled into the kitchen and got two onions out of a basket.",
        "He met her coming out.",
    ]
    found = _found(texts, [jemima])
    out = credited(found, texts, [False] * 4, [jemima])
    assert out[1] == out[2] == jemima[0]
    assert out[3] == frozenset()  # "He" is someone else


def test_a_possessive_mention_casts_no_vote() -> None:
    # Rumpelstiltskin: "the miller's daughter ... she" is the daughter; the miller himself is "he"
    texts = [
        "THERE was once a miller who was poor, but he had one beautiful daughter.",
        "And so the poor miller's daughter was left there sitting, and she could not think what to do.",
        "The miller's daughter wept, and she was afraid.",
    ]
    assert genders([[True, True, True]], texts, ["miller"]) == ["m"]
