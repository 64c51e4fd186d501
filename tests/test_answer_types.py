"""Answer types (nodes/backends/answer_types.py) and the reader's use of them (sentence_scoring.py)."""

from folio.nodes.backends.answer_types import AnswerType, answer_type, type_cue
from folio.nodes.core import sentence_scoring
from folio.nodes.core.text import words


def _cue(question: str, text: str) -> float:
    return type_cue(answer_type(question), text, frozenset(words(question)))


def test_questions_name_the_type_they_ask_for():
    assert answer_type("Which lake does the Hoover Dam impound?") == AnswerType("named", "lake")
    assert answer_type("Which museums hold the stones?") == AnswerType("named", "museum")
    assert answer_type("In what year did the Nazis seize power?").kind == "year"
    assert answer_type("When was the Declaration signed?").kind == "year"
    assert answer_type("How many languages are spoken in London?").kind == "amount"
    assert answer_type("What was the population of Washington in 2020?").kind == "amount"
    assert answer_type("What is the name of the little Eloi woman?").kind == "name"
    assert answer_type("Who founded Perth?").kind == "name"
    assert answer_type("To whom was the mouldy old letter addressed?").kind == "name"
    assert answer_type("Where did Elizabeth II die?").kind == "place"
    assert answer_type("What did the Time Traveller use to light his way?").kind == ""
    assert answer_type("Which one of them came first?").kind == ""  # a generic head names no type


def test_a_sentence_holds_the_asked_type_only_when_the_question_does_not():
    assert _cue("Which lake does the Hoover Dam impound?", "Hoover Dam impounds Lake Mead.") == 1.0
    assert _cue("Which lake does the Hoover Dam impound?", "The Hoover Dam is a dam.") == 0.0
    assert _cue("Which museum holds the Rosetta Stone?", "It is shown at the British Museum.") == 1.0
    assert _cue("Which river flows through the town?", "Mainly the River Tame flows there.") == 1.0
    assert _cue("In what year was it signed?", "It was signed in 1776 by the Congress.") == 1.0
    assert _cue("When did he arrive?", "He arrived on July 4 after a storm.") == 1.0
    assert _cue("When did he arrive?", "He arrived after a storm.") == 0.0
    assert _cue("How many languages are spoken?", "Over 300 languages are spoken.") == 1.0
    assert _cue("How many legs do spiders have?", "Spiders have eight legs.") == 1.0
    assert _cue("How many legs do spiders have?", "Spiders have legs.") == 0.0
    assert _cue("Who founded Perth?", "Perth was founded by Captain James Stirling.") == 1.0
    assert _cue("Who founded Perth?", "Perth was founded long ago.") == 0.0  # its one name is the question's
    question = "What was the name of the woman who befriended the Time Traveller?"
    assert _cue(question, "After a time we looked only at the Time Traveller’s face.") == 0.0  # possessive
    assert _cue(question, "I found that her name was Weena, the Time Traveller said.") == 1.0
    assert _cue("Who was Alice's sister?", "Then Alice's sister woke up.") == 0.0
    assert _cue("Where did Elizabeth die?", "Elizabeth died at Balmoral Castle.") == 1.0
    assert _cue("Where did Elizabeth die?", "Elizabeth died in her sleep.") == 0.0


def test_reader_prefers_the_sentence_of_the_asked_type_among_equals():
    question = "Which lake does the dam impound?"
    texts = ["The dam is the tallest dam and it holds a lake.", "The dam impounds Lake Mead, a lake."]
    flat = _untyped_scores(question, texts)
    typed = sentence_scoring.relevance(question, texts)
    assert sentence_scoring.TYPE_WEIGHT > 0 and typed[1] > typed[0]
    assert typed[1] - typed[0] > flat[1] - flat[0]
    untyped = "What did the dam hold?"  # no type asked: the scores are what they were
    assert sentence_scoring.relevance(untyped, texts) == _untyped_scores(untyped, texts)


def _untyped_scores(question, texts):
    """The reader's scores without the answer-type cue."""
    before = sentence_scoring.TYPE_WEIGHT
    try:
        sentence_scoring.TYPE_WEIGHT = 0.0
        return sentence_scoring.relevance(question, texts)
    finally:
        sentence_scoring.TYPE_WEIGHT = before


def test_kiwix_opening_paragraph_yields_to_one_holding_the_asked_type():
    from folio.nodes.kiwix.fusion import _opening_answers

    lead = "Hoover Dam\nHoover Dam is a concrete arch-gravity dam in the Black Canyon of the Colorado River."
    later = "Hoover Dam\nThe dam impounds Lake Mead, the largest reservoir in the United States."
    close = [0.5, 0.55]  # the later paragraph scores within the opening's margin
    assert not _opening_answers("Which lake does the Hoover Dam impound?", [lead, later], close, 1)
    assert _opening_answers("What does the Hoover Dam impound?", [lead, later], close, 1)  # no type asked
    assert not _opening_answers("What does the Hoover Dam impound?", [lead, later], [0.2, 0.55], 1)


def test_a_price_and_a_span_of_time_are_asked_for_by_their_own_words():
    assert answer_type("How much did the Red-headed League pay a member?").kind == "price"
    assert answer_type("How much was the reward for the blue carbuncle?").kind == "price"
    assert answer_type("How much sugar is in the cake?").kind == "amount"  # no word of paying
    assert answer_type("How long did the cat sit on the basket?").kind == "duration"
    assert answer_type("How long can termite queens live?").kind == "duration"
    assert answer_type("How long are the sides of a triangle?").kind == "amount"  # a length
    price = "How much did the League pay a member?"
    assert _cue(price, "It entitles a member to a salary of £4 a week.") == 1.0
    assert _cue(price, "He paid four pounds and ten shillings.") == 1.0
    assert _cue(price, "I'd give a shilling a line for a verbatim note.") == 1.0
    assert _cue(price, "It took two years to make.") == 0.0  # a number, no money
    assert _cue(price, "He put on a crown.") == 0.0  # a king's crown: money only after a number
    assert _cue(price, "He gave me five crowns.") == 1.0
    sat = "How long did the cat sit on the basket?"
    assert _cue(sat, "She sat there for FIVE HOURS.") == 1.0
    assert _cue(sat, "The cat sat upon the basket, and two rabbits cried.") == 0.0  # a number, no time


def test_a_leading_clause_that_sets_the_context_is_not_what_a_question_asks():
    from folio.nodes.backends.answer_types import asked_clause

    question = "According to the old Gay-Head Indian, where did Ahab lose his leg?"
    assert asked_clause(question) == "where did Ahab lose his leg?"
    assert answer_type(question).kind == "place" and sentence_scoring.asked(question) == "where"
    assert _cue(question, "“Aye, he was dismasted off Japan,” said the old Gay-Head Indian once.") == 1.0
    assert answer_type("According to Barrymore, how much did he pay?").kind == "price"
    assert asked_clause("Who was it, who came?") == "Who was it, who came?"  # opens with its wh-word
    assert asked_clause("Alice, the girl, cried.") == "Alice, the girl, cried."  # no question after the comma
    # "which two features" asks for no name ending in "two"
    assert answer_type("Apart from his size, which two features marked the whale?").kind == ""


def test_what_date_asks_for_a_year_or_a_date():
    question = "What date is on the back of the portrait of the wicked Hugo Baskerville?"
    assert answer_type(question).kind == "year" and sentence_scoring.asked(question) == "when"
    assert _cue(question, "the name and the date, 1647, are on the back of the canvas.") == 1.0


def test_what_happened_and_what_someone_did_ask_for_an_event():
    from folio.nodes.backends.answer_types import asks_event

    for question in (
        "What happened to Mr. Korbes at the end?",
        "What did old Mrs. Rabbit do with the onions?",
        "What do they do after a meal?",
        "What did the coal, bean, and straw decide to do?",
        "According to the hen, what happened next?",
    ):
        assert asks_event(question), question
    for question in (
        "What did the miller tell the king his daughter could do?",  # an ability, not an event
        "What did Hans get from his master?",
        "Why did the two decide to leave?",
        "Who did the cock and the hen encounter?",
    ):
        assert not asks_event(question), question
