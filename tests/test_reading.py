"""The reader: question kinds, sentence relevance, passages that read on their own, book passages."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.nodes.core import reading
from folio.nodes.core import sentence_scoring as scoring
from folio.nodes.core.reading import passage, read_book
from folio.nodes.core.sentence_scoring import (
    FOCUS_SHARE,
    asked,
    focus_terms,
    focused,
    found_terms,
    kind_cue,
    named_noun,
    needs_previous,
    relevance,
    word_count,
    word_scores,
)
from folio.nodes.core.types import Hit
from tests.conftest import BOOKS

GRIMM = BOOKS / "txt" / "pg19068_grimm_household-stories_lucy-crane.txt"


def hit(chunk_id: str, chapter: str, start: int, end: int, rank_score: float = 1.0) -> Hit:
    return Hit("book", "ch", "Chapter", chunk_id, start, end, rank_score, chapter[start:end])


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who were the brother and sister living with after their mom died?", "who"),
        ("When did Peter lose his jacket?", "when"),
        ("Where did the witch live?", "where"),
        ("Why did the two decide to leave?", "why"),
        ("How did Gretel kill the witch?", "how"),
        ("How many kids did the goat have?", "how-many"),
        ("What is a whale?", "what-is"),
        ("What did the prince find in the tower?", "other"),
        ("In what year was it written?", "when"),
    ],
)
def test_the_kind_of_answer_a_question_asks_for(question: str, kind: str) -> None:
    assert asked(question) == kind


@pytest.mark.parametrize(
    ("sentence", "dependent"),
    [
        ("He ran home.", True),
        ("“She is not here,” said the cook.", True),
        ("This was the sign they waited for.", True),
        ("But the wicked mother-in-law was very unhappy.", False),  # a connective reads on its own
        ("Then Grethel gave her a push.", False),
        ("and so they lived happily.", True),
        ("wicked witch.” She laughed.", True),
        ("Peter ran home.", False),
        ("“Come here,” said he.", False),
        ("Hansel and Grethel sat by the fire.", False),
    ],
)
def test_a_sentence_opening_with_a_pronoun_needs_its_predecessor(sentence: str, dependent: bool) -> None:
    assert needs_previous(sentence) is dependent


def test_passage_takes_the_predecessor_a_pronoun_needs_in_reading_order() -> None:
    texts = ["The sky was grey.", "Peter lost his jacket.", "He cried all the way home.", "It rained."]
    assert passage(texts, [0.0, 0.1, 0.9, 0.0], max_words=11) == (1, 2)


def test_passage_adds_neighbours_the_following_first_while_they_fit() -> None:
    texts = [
        "Peter went out.",
        "Peter lost his jacket in the garden.",
        "Mr. McGregor found it.",
        "Night fell.",
    ]
    assert passage(texts, [0.5, 0.9, 0.1, 0.1], max_words=11) == (1, 2)  # 7 + 4 words
    assert passage(texts, [0.5, 0.9, 0.1, 0.1], max_words=60) == (0, 1, 2, 3)


def test_passage_adds_a_neighbour_only_when_it_scores_close_when_so_tuned(monkeypatch) -> None:
    monkeypatch.setattr(reading, "NEIGHBOUR_SHARE", 0.75)
    texts = [
        "Peter went out.",
        "Peter lost his jacket in the garden.",
        "Mr. McGregor found it.",
        "Night fell.",
    ]
    assert passage(texts, [0.0, 0.9, 0.8, 0.1], max_words=60) == (1, 2)
    assert passage(texts, [0.0, 0.9, 0.2, 0.1], max_words=60) == (1,)


def test_passage_stays_within_max_words_but_keeps_a_long_best_sentence() -> None:
    long = " ".join(["word"] * 70) + "."
    texts = ["He was there.", long, "It was done."]
    assert passage(texts, [0.8, 0.9, 0.8], max_words=60) == (1,)  # the best alone is over 60 words
    assert passage([], [], 60) == ()


def test_a_when_question_prefers_the_sentence_with_a_time() -> None:
    texts = ["The soldier came to the castle gate.", "The soldier came to the castle at midnight."]
    scores = relevance("When did the soldier come to the castle?", texts)
    assert scores[1] > scores[0]


def test_a_why_question_prefers_the_sentence_with_a_reason() -> None:
    texts = ["The children left the house.", "The children left the house because they were hungry."]
    scores = relevance("Why did the children leave the house?", texts)
    assert scores[1] > scores[0]


def test_relevance_is_between_zero_and_one_per_text() -> None:
    scores = relevance("Who is Ahab?", ["Ahab is the captain.", "The sea.", ""])
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert relevance("Who is Ahab?", []) == ()


def test_word_scores_weigh_rare_words_and_match_inflections() -> None:
    texts = ["Hansel walked.", "Hansel dropped the white pebbles.", "Hansel slept."]
    scores = word_scores("Why did Hansel drop pebbles?", texts)
    assert scores[1] == max(scores) and scores[1] == pytest.approx(1.0)
    assert scores[0] < 0.5  # "Hansel" is in every text: it counts least (a name counts double)


def test_how_a_question_is_asked_is_no_word_to_find() -> None:
    # "What kind of things often ...": "kind" and "often" are how it asks; Sherlock Holmes's "You have
    # been very kind" was read as holding a word of it
    question = "What kind of things often disappeared at night?"
    texts = ["You have been very kind, said he.", "Things disappeared at night, especially cheese.", "Often."]
    scores = word_scores(question, texts)
    assert scores[0] == 0.0 and scores[2] == 0.0 and scores[1] == pytest.approx(1.0)
    assert word_scores("Was the kind old woman at home?", texts)[0] > 0  # "kind" asked as a word of its own


def test_an_irregular_past_form_matches_the_question_s_base_form() -> None:
    texts = ["The king sent his servant to the mill.", "The king walked to the mill."]
    scores = word_scores("Who did the king send to the mill?", texts)
    assert scores[0] > scores[1]
    mice = word_scores("Where did the mouse hide?", ["The mice hid in the wall.", "The cat slept."])
    assert mice[0] == pytest.approx(1.0)


def _grimm_story(title: str) -> str:
    text = GRIMM.read_text(encoding="utf-8")
    start = text.index(title + "\n")
    return text[start : start + 6000]


def test_overlapping_chunks_give_each_sentence_once_with_chapter_offsets() -> None:
    chapter = _grimm_story("HANSEL AND GRETHEL")
    hits = [hit("c1", chapter, 0, 2000), hit("c2", chapter, 1800, 3800)]
    passages = read_book(
        "What did the woodcutter's wife tell him to do with the children?",
        hits,
        lambda b, c: chapter,
        None,
        max_words=60,
        max_passages=5,
    )
    quotes = [q for p in passages for q in p.quotes]
    assert quotes and len({(q.start, q.end) for q in quotes}) == len(quotes)
    for q in quotes:
        assert " ".join(chapter[q.start : q.end].split()) == q.text
        assert q.chunk_id in ("c1", "c2")
    for p in passages:
        assert [q.start for q in p.quotes] == sorted(q.start for q in p.quotes)
        read_on = max(reading.SHORT_PASSAGE, reading.SPOKEN_PASSAGE)  # the last may pass the budget
        assert p.words <= 60 or len(p.quotes) == 1 or p.words - word_count(p.quotes[-1].text) < read_on


def test_a_short_passage_reads_on_into_the_sentence_that_follows() -> None:
    # Flatland's "... not allowed, and for this reason." is followed by the reason, 118 words long: past
    # the 60-word budget, which before left the answer at the sentence that only repeats the question
    text = (BOOKS.parent / "formats" / "other" / "abbott-flatland.md").read_text(encoding="utf-8")
    start = text.index("Square and triangular houses are not allowed")
    chapter = text[start - 1500 : start + 1500]
    hits = [hit("c1", chapter, 0, len(chapter))]
    question = "Why are square and triangular houses not allowed in Flatland?"
    best = read_book(question, hits, lambda b, c: chapter, None, 60, 3)[0]
    assert best.quotes[0].text == "Square and triangular houses are not allowed, and for this reason."
    assert best.quotes[1].text.startswith("The angles of a Square") and len(best.quotes) == 2
    assert word_count(best.quotes[1].text) > 60


def test_a_pronoun_takes_its_predecessor_from_its_own_paragraph_only(monkeypatch) -> None:
    # Potter's Roly-Poly Pudding: the sentence that answers opens with "They"; the sentence before it
    # closes the paragraph before, which FairytaleQA's gold puts in another section
    chapter = (
        "And when I was going to the post late in the afternoon I looked up the lane from the corner, and "
        "I saw Mr. Samuel Whiskers and his wife on the run, with big bundles on a little wheelbarrow.\n\n"
        "They were just turning in at the gate to the barn of Farmer Potatoes. She seemed to know her way."
    )
    hits = [hit("c1", chapter, 0, len(chapter))]
    question = "Where did they turn in at the gate?"
    best = read_book(question, hits, lambda b, c: chapter, None, 60, 1)[0]
    assert best.quotes[0].text.startswith("They were just turning in")
    one = chapter.replace("\n\n", " ")  # one paragraph: the predecessor joins
    joined = read_book(question, [hit("c1", one, 0, len(one))], lambda b, c: one, None, 60, 1)[0]
    assert joined.quotes[0].text.startswith("And when I was going")
    monkeypatch.setattr(reading, "CROSS_PARAGRAPH", True)
    before = read_book(question, hits, lambda b, c: chapter, None, 60, 1)[0]
    assert before.quotes[0].text.startswith("And when I was going")


def test_a_chunk_cut_mid_sentence_is_read_whole_from_the_chapter() -> None:
    chapter = _grimm_story("HANSEL AND GRETHEL")
    cut = chapter.index("the white flints") - 40  # a chunk starting in the middle of the flints sentence
    hits = [hit("c1", chapter, cut, cut + 1500)]
    passages = read_book("What did Hansel fill his pocket with?", hits, lambda b, c: chapter, None, 60, 3)
    first = passages[0].quotes[0]
    assert first.start < cut or chapter[first.start].isupper() or chapter[first.start] in "\"'“‘"
    without_chapter = read_book("What did Hansel fill his pocket with?", hits, lambda b, c: None, None, 60, 3)
    assert all(not q.text[:1].islower() for p in without_chapter for q in p.quotes)


def test_a_row_of_dots_is_not_a_sentence_of_a_passage() -> None:
    chapter = (
        "Tom Kitten was caught by the rats. All in a minute she rushed upon Tom Kitten. . . . . "
        "The rats rolled him up in dough. They wanted to make a kitten dumpling."
    )
    hits = [hit("c1", chapter, 0, len(chapter))]
    passages = read_book("What did the rats want to make out of Tom Kitten?", hits, lambda b, c: chapter)
    quotes = [q.text for p in passages for q in p.quotes]
    assert "They wanted to make a kitten dumpling." in quotes
    assert all(any(ch.isalnum() for ch in q) for q in quotes)


def test_no_hits_no_passages() -> None:
    assert read_book("Anything?", [], lambda b, c: None) == ()


def test_one_line_of_speech_reads_on_into_its_reply() -> None:
    # Hans asks for his wages in 36 words; the master's reply, past the 60-word budget, says what he
    # gave: before, the answer stopped at the request ("... so give me my wages.")
    chapter = _grimm_story("HANS IN LUCK")
    hits = [hit("c1", chapter, 0, 3000)]
    for question in ("What did the master give to Hans?", "What did Hans get from his master as wages?"):
        best = read_book(question, hits, lambda b, c: chapter, None, 60, 3)[0]
        assert [q.text.split()[0] for q in best.quotes] == ["HANS", '"You'], best.quotes
        assert "a lump of gold as big as his head" in best.quotes[1].text
        assert best.words > 60


def test_one_narrative_sentence_over_the_short_passage_does_not_read_past_the_budget() -> None:
    lone = "The king " + "and the queen " * 11 + "rode home."  # 37 words, no speech
    reply = "Then " + "the people cheered " * 8 + "loudly."  # 26 words: past a 60-word budget
    texts = [lone, reply]
    assert reading._filled(texts, 0, 0, lambda i: True, 60) == range(0, 1)
    spoken = [f"{lone[:-1]}, and the king said, “Home.”", reply]
    assert reading._filled(spoken, 0, 0, lambda i: True, 60) == range(0, 2)


@pytest.mark.parametrize(
    ("sentence", "spoken"),
    [
        ('He said, "Give me my wages."', True),
        ("“Your hat, your hat, sir!” cried the seaman.", True),
        ("‘Off with her head!’ the Queen shouted.", True),
        ("It wasn’t the master’s fault.", False),  # apostrophes are no speech
        ("Hans served his master seven years.", False),
    ],
)
def test_a_sentence_speaks_when_it_opens_a_quotation(sentence: str, spoken: bool) -> None:
    assert reading.speaks(sentence) is spoken


def test_the_grimm_text_is_the_real_book() -> None:
    assert Path(GRIMM).is_file()


def test_question_words_in_a_context_count_as_found_in_the_text() -> None:
    question = "What did Hans carry home in Hans in Luck?"
    texts = ["He carried a lump of gold.", "Hans carried a lump of gold."]
    alone, _ = found_terms(question, texts)
    titled, weight = found_terms(question, texts, ["HANS IN LUCK", ""])
    assert "hans" not in alone[0] and "hans" in titled[0]
    assert titled[0] >= alone[0] and titled[1] == alone[1]
    assert sum(weight.values()) == pytest.approx(1.0)


def _story_text(story: str) -> str:
    """A Grimm story's text without its title line (the title is the chapter's, not a sentence)."""
    return _grimm_story(story).split("\n", 1)[1]


def _titled(chunk_id: str, story: str, rank_score: float) -> Hit:
    return Hit("grimm", story, story, chunk_id, 0, 1500, rank_score, _story_text(story)[:1500])


@pytest.mark.parametrize("title_context", [True, False])
def test_a_sentence_is_read_under_its_chapter_title(
    monkeypatch: pytest.MonkeyPatch, title_context: bool
) -> None:
    # the question names its story, whose text never does: read under the chapter title, the story's
    # own sentence wins over a better-ranked story that holds more of the other words
    hits = [_titled("c1", "THE FROG PRINCE", 2.0), _titled("c2", "RUMPELSTILTSKIN", 1.0)]
    monkeypatch.setattr(reading, "TITLE_CONTEXT", title_context)
    question = "Why did the king's daughter weep in Rumpelstiltskin?"
    passages = read_book(question, hits, lambda b, c: _story_text(c), None, 60, 3)
    first = passages[0].quotes[0]
    assert (first.chapter_title == "RUMPELSTILTSKIN") == title_context
    if title_context:
        assert "miller's daughter" in passages[0].text


def test_kind_cue_and_word_count() -> None:
    assert kind_cue("how-many", "He had seven sons.", frozenset()) == 1.0
    assert kind_cue("how-many", "He had sons.", frozenset()) == 0.0
    assert kind_cue("who", "Then came Rumpelstiltskin.", frozenset()) == 1.0
    assert kind_cue("who", "Then came Rumpelstiltskin.", frozenset(["rumpelstiltskin"])) == 0.0
    assert word_count("  a lump  of gold ") == 4


ALICE = BOOKS / "txt" / "pg11_carroll_alices-adventures-in-wonderland.txt"


def test_the_subject_s_names_are_not_what_a_question_asks_about() -> None:
    assert focus_terms("What did the Mad Hatter say about time?") == {"time"}
    assert focus_terms("What did the queen say about time?") == frozenset()  # no names: no subject
    weight = {"mad": 0.5, "hatter": 0.3, "time": 0.2}
    assert focused(frozenset({"mad", "hatter"}), weight, frozenset({"time"})) == pytest.approx(0.4)
    assert focused(frozenset({"hatter", "time"}), weight, frozenset({"time"})) == pytest.approx(0.5)
    assert focused(frozenset({"mad", "hatter"}), weight, frozenset()) == pytest.approx(0.8)


def _alice_hit(chunk_id: str, text: str, around: str, title: str) -> Hit:
    start = text.index(around) - 700
    return Hit("alice", title, title, chunk_id, start, start + 1500, 1.0, text[start : start + 1500])


@pytest.mark.parametrize("focus_share", [FOCUS_SHARE, 1.0])
def test_a_sentence_that_only_names_the_subject_gives_way_to_one_about_what_is_asked(
    monkeypatch: pytest.MonkeyPatch, focus_share: float
) -> None:
    # "What did the Mad Hatter say about time?": the best-ranked chunk (Pig and Pepper) names the Mad
    # Hatter ("I've seen hatters before ... mad") and says nothing of time; the Tea-Party's Hatter does
    text = ALICE.read_text(encoding="utf-8")
    hits = [
        _alice_hit("c1", text, "I’ve seen hatters before", "CHAPTER VI. Pig and Pepper"),
        _alice_hit("c2", text, "we’ve no time to wash the things", "CHAPTER VII. A Mad Tea-Party"),
    ]
    monkeypatch.setattr(scoring, "FOCUS_SHARE", focus_share)
    passages = read_book("What did the Mad Hatter say about time?", hits, lambda b, c: text, None, 60, 3)
    first = passages[0].quotes[0]
    assert (first.chapter_title == "CHAPTER VII. A Mad Tea-Party") == (focus_share < 1.0)
    if focus_share < 1.0:
        assert "time" in passages[0].text and "Hatter" in passages[0].text


def test_a_question_s_names_and_what_a_text_holds_of_them() -> None:
    names = scoring.name_terms("What was particular about Lucinda?")
    assert names == {"lucinda"}
    assert scoring.held_terms(names, "After pulling half the feathers out of Lucinda's bolster") == names
    assert scoring.held_terms(names, "most terrible particular!") == frozenset()
    assert scoring.held_terms(frozenset({"gastropod"}), "The Gastropoda") == {"gastropod"}  # one letter more
    assert scoring.name_terms("What did the queen say about time?") == frozenset()
    # a stem and one that extends it by at most two letters match either way ("dropp" / "drop")
    held = scoring.held_terms
    assert held(frozenset({"dropp"}), "They drop it.") == {"dropp"}
    assert held(frozenset({"drop"}), "They dropped it.") == {"drop"}
    assert held(frozenset({"dro"}), "They drop it.") == frozenset()  # under four letters: the same stem only


def test_a_name_weighs_as_any_word_unless_only_a_chapter_title_holds_it() -> None:
    """ "What creature did the Time Traveller see on the beach?": the narrator's "to tell the Time Traveller"
    repeats the name; the Time Traveller's own "a monstrous crab-like creature" answers (names weighed
    double before issue 27's session 38, and the first won)."""
    text = (BOOKS / "txt" / "pg35_wells_the-time-machine.txt").read_text(encoding="utf-8")
    flat = " ".join(text.split())
    told = "I got up and went down the passage to tell the Time Traveller."
    crab = "Then I saw the thing was really a monstrous crab-like creature."
    assert told in flat and crab in flat
    question = "What creature did the Time Traveller see on the beach at the end of the world?"
    scores = word_scores(question, [told, crab])
    assert scores[1] > scores[0]
    _, weight = found_terms(question, [told, crab])
    assert weight["traveller"] == pytest.approx(weight["creature"])  # each in one text: the same weight
    # a story's name said only by its chapter title still picks that story (it counts double)
    _, titled = found_terms(
        "Why did the daughter weep in Rumpelstiltskin?", ["She wept.", "She wept."], ["RUMPELSTILTSKIN", ""]
    )
    assert titled["rumpelstiltskin"] > titled["weep"]


def _best_passage(book: Path, marker: str, question: str, before: int, after: int) -> reading.Passage:
    """The reader's best passage of a real book's text around ``marker`` (``before`` / ``after``
    characters of it), read as one evidence chunk."""
    text = book.read_text(encoding="utf-8")
    start = text.index(marker)
    chapter = text[start - before : start + after]
    return read_book(question, [hit("c1", chapter, 0, len(chapter))], lambda b, c: chapter, None, 60, 3)[0]


def test_a_passage_opens_at_the_sentence_that_answers_not_one_that_adds_no_question_word() -> None:
    # "So the King went away ..." shares only "Queen" with the question, which the next sentence holds
    # too: the pair scored as one unit opened the answer (and its first citation) a sentence early
    question = "Who noticed the door open and the true queen come in?"
    best = _best_passage(GRIMM, "So the King went away, and never knew", question, 2500, 2500)
    assert best.quotes[0].text.startswith("Now, when it was midnight, and every one was asleep, the nurse")


def test_the_name_a_question_asks_for_is_found_only_where_a_text_gives_a_name() -> None:
    # "What was the name of ...?": "name" is the answer's frame; "in the name of good-fortune" holds
    # none, "called Simpkin" and "His name is Vincent Spaulding" do
    question = "What was the name of Jabez Wilson's assistant?"
    texts = [
        "“How, in the name of good-fortune, did you know all that, Mr. Holmes?” he asked.",
        "“His name is Vincent Spaulding, and he’s not such a youth, either.",
        "He lived alone with his cat; it was called Simpkin.",
        "Stuffs had strange names, and were very expensive.",
    ]
    found, _ = found_terms(question, texts)
    assert ["name" in f for f in found] == [False, True, True, False]
    # a question that does not ask for a name keeps the word as any other
    found, _ = found_terms("Where does the bobcat get its name?", ["from which it derives its name"])
    assert "name" in found[0]


@pytest.mark.parametrize(
    ("question", "noun"),
    [
        ("What was the name of Alice's cat?", "cat"),
        ("What was the name of the tailor of Gloucester's cat?", "cat"),
        ("What were the names of the three little sisters in the Dormouse's story?", "sister"),
        ("What was the name of the little woman the Time Traveller saved from drowning?", "woman"),
        ("What was the name of the ship with an epidemic on board, captained by Mayhew?", "ship"),
        ("What was the little man's name in the story of the miller's daughter?", "man"),
        ("What was the name of one of the three kittens?", "kitten"),
        ("What name does the narrator ask the reader to call him?", ""),
    ],
)
def test_the_noun_whose_name_a_question_asks_for(question: str, noun: str) -> None:
    assert named_noun(question) == noun


def test_the_many_of_how_many_is_the_question_s_frame_not_a_word_the_answer_says() -> None:
    # "How many kittens were there?": "how many they have caught--dozens and dozens" held half the
    # question's words and beat "there were three little kittens"
    texts = [
        "Once upon a time there were three little kittens, and their names were Mittens and Moppet.",
        "They hang up the rats' tails on the door, to show how many they have caught--dozens and dozens.",
    ]
    found, weight = found_terms("How many kittens were there?", texts)
    assert found == [frozenset({"kitten"}), frozenset()] and set(weight) == {"kitten"}
    found, _ = found_terms("How much money did Sir Charles leave?", ["he left as much money as that"])
    assert "much" not in found[0] and "money" in found[0]
    found, _ = found_terms("Why did Alice cry so much?", ["she cried so much"])  # no amount asked
    assert "much" in found[0]


def test_a_text_gives_the_asked_noun_s_name_by_apposition_but_not_in_a_question_or_an_address() -> None:
    question = "What was the name of Alice's cat?"
    texts = [
        "(Dinah was the cat.)",
        "And yet I wish I could show you our cat Dinah.",
        "‘It’s a friend of mine--a Cheshire Cat,’ said Alice.",
        "“Are you called Jack?” she asked.",
    ]
    found, _ = found_terms(question, texts)
    assert ["name" in f for f in found] == [True, True, False, False]
    found, _ = found_terms(
        "What was the name of Jabez Wilson's assistant?", ["a smarter assistant, Mr. Holmes"]
    )
    assert "name" not in found[0]


def test_the_little_man_s_name_is_the_one_he_gives_not_the_queen_s_guesses() -> None:
    # the name weighs double in a naming question and a question gives no name: before, "in came a little
    # man" (little, man, miller's, daughter) and the queen's "Are you called Jack?" came first
    question = "What was the little man's name in the story of the miller's daughter?"
    best = _best_passage(GRIMM, "That the name I am called is Rumpelstiltskin", question, 2500, 1500)
    assert best.text.startswith("I am glad that nobody knew That the name I am called is Rumpelstiltskin")


def test_the_tailor_of_gloucesters_cat_is_the_one_called_simpkin_not_the_stuffs_with_strange_names() -> None:
    question = "What was the name of the tailor of Gloucester's cat?"
    potter = BOOKS / "txt" / "pg572_potter_great-big-treasury.txt"
    best = _best_passage(potter, "lutestring; stuffs had strange names", question, 1500, 2500)
    assert "called Simpkin" in best.text and "strange names" not in best.text


def test_where_the_old_gay_head_indian_said_ahab_lost_his_leg_is_the_place_he_names() -> None:
    # "According to ..., where ...?" asks for a place: before, the leading clause hid the "where", and the
    # sentence repeating "an old Gay-Head Indian" won over "he was dismasted off Japan"
    question = "According to the old Gay-Head Indian, where did Ahab lose his leg?"
    moby = BOOKS / "txt" / "pg2701_melville_moby-dick.txt"
    best = _best_passage(moby, "an old Gay-Head Indian among the crew", question, 1500, 2500)
    assert "dismasted off Japan" in best.text


@pytest.mark.parametrize("weight", [reading.EVENT_LENGTH_WEIGHT, 0.0])
def test_asked_what_happened_the_sentence_that_tells_it_wins(monkeypatch: pytest.MonkeyPatch, weight: float):
    # "he was not at home" holds the question's name and "home" as the answer does, in fewer words: asked
    # for an event, the sentence that goes on to tell it ("the cat threw ashes in his eyes") wins
    chapter = _grimm_story("MR KORBES")
    hits = [hit("c1", chapter, 0, len(chapter))]
    monkeypatch.setattr(reading, "EVENT_LENGTH_WEIGHT", weight)
    best = read_book("What happened to Mr. Korbes when he returned home?", hits, lambda b, c: chapter)[0]
    tells = best.quotes[0].text.startswith("Then Mr. Korbes came home")
    assert tells is (weight > 0)
    # a question for a thing, not an event, is read as before
    assert not reading.asks_event("What did the cock build?")


class CountingEncoder:
    """A remembered encoder (it has a ``model_id``) that records the texts it is asked to encode."""

    model_id = "counting-test-encoder"
    query_prefix = ""
    window_tokens = 256

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts):
        import numpy as np

        self.encoded.extend(texts)
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    def encode_query(self, text: str):
        return self.encode([self.query_prefix + text])[0]


def test_the_reader_reuses_the_searchs_vector_of_the_question() -> None:
    from folio.nodes.backends.encoder import remembered_query
    from folio.nodes.core.ranking import search_text

    chapter = "Peter went to look for some parsley. He met Mr. McGregor. Mr. McGregor ran after him."
    question = "Why did Peter look for parsley?"
    encoder = CountingEncoder()
    remembered_query(encoder, search_text(question))  # what the search encoded
    assert encoder.encoded == ["Why did Peter look for parsley"]
    read_book(question, [hit("c1", chapter, 0, len(chapter))], lambda b, c: chapter, encoder, 60, 1)
    # the reader encoded only its sentence units: the question's vector was the search's
    assert encoder.encoded[1:] and all(t in chapter for t in encoder.encoded[1:])
