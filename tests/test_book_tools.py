"""Book tools and the book flow: question kinds, budget, session cache, tool definitions, scope,
one escalation, degraded (lexical-only) mode and lazy chapter summaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from folio.dataflows.asking import _library
from folio.nodes.backends.book_tools import BookTools, BudgetExceeded, Session, ToolBudget, WideningRefused
from folio.nodes.backends.summaries import extractive_summary
from folio.nodes.core.evidence import refers_back, renamed, scope_chapters, sufficient
from folio.nodes.core.ranking import missing_names, names_in, one_edit, respellings, word_respellings
from folio.nodes.core.sentence_scoring import lemma_coverage, lemma_stems
from folio.nodes.core.text import question_kind
from folio.nodes.core.types import (
    NOT_FOUND,
    SEMANTIC_UNAVAILABLE,
    BookEvidence,
    BookHits,
    ConceptMatch,
    ConceptMatches,
    Hit,
    RouteDecision,
)
from folio.nodes.core.word_forms import asked_frame, spelling_variant
from folio.nodes.query.book_flow import (
    _book_hits,
    _boosted,
    _judged,
    _names_carried,
    _whole_book_evidence,
)


@pytest.fixture(scope="module")
def potter(fairytale_library: Path, encoder) -> tuple[dict, dict, object]:
    _, stores, maps = _library(fairytale_library)
    potter_id = next(b for b in stores if b.startswith("the-great-big-treasury"))
    return {potter_id: stores[potter_id]}, {potter_id: maps[potter_id]}, encoder


def tools_for(potter, budget: int = 8, encoder: object = "default") -> BookTools:
    stores, maps, enc = potter
    return BookTools(stores, maps, enc if encoder == "default" else encoder, ToolBudget(budget), Session())


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who was the brother and sister living with?", "concrete"),
        ("What did Peter Rabbit lose in the garden?", "concrete"),
        ("How many cakes did the cat eat?", "concrete"),
        ('Who said "Now my dear"?', "concrete"),
        ("Why did the two decide to leave?", "conceptual"),
        ("How did the mother feel when she heard the news?", "conceptual"),
        ("What lesson does the story teach?", "conceptual"),
    ],
)
def test_question_kind_rule(question: str, kind: str) -> None:
    assert question_kind(question) == kind


def _h(chunk: str, chapter: str, score: float, text: str = "") -> Hit:
    return Hit("b", chapter, chapter, chunk, 0, 1, score, text or chunk)


def test_a_scope_boosts_its_chapters_but_the_best_hits_elsewhere_still_compete() -> None:
    hits = [_h("best", "c9", 1.0), _h("in-scope", "c1", 0.8), _h("other", "c2", 0.75)]
    boosted = _boosted(hits, ("c1",), 0.1)
    assert [h.chunk_id for h in boosted] == ["best", "in-scope", "other"]  # 0.9 < 1.0: the best stays first
    assert [h.chunk_id for h in _boosted(hits, ("c1",), 0.3)] == ["in-scope", "best", "other"]
    assert _boosted(hits, None, 0.3) == tuple(hits) and _boosted(hits, ("c1",), 0.0) == tuple(hits)


def test_ninth_tool_call_is_refused(potter) -> None:
    tools = tools_for(potter)
    for _ in range(8):
        tools.text_search("Peter Rabbit")
    with pytest.raises(BudgetExceeded, match="budget of 8 tool calls"):
        tools.text_search("Peter Rabbit")
    assert tools.budget.used == 8 and tools.budget.refused == ["text_search"]


def test_session_caches_lookups_and_searches(potter) -> None:
    tools = tools_for(potter)
    first = tools.text_search("Mr. McGregor garden")
    again = tools.text_search("Mr. McGregor garden")
    tools.concept_map_lookup("Peter Rabbit")
    tools.concept_map_lookup("Peter Rabbit")
    assert again == first
    assert (tools.session.hits, tools.session.misses) == (2, 2)


def test_tool_definitions_are_openai_functions() -> None:
    defs = BookTools.definitions()
    names = {d["function"]["name"] for d in defs}
    assert names == {
        "book_concept_map_lookup",
        "chapter_summary_get",
        "search",
        "text_search",
        "semantic_search",
        "chunk_get",
        "book_synopsis_get",
    }
    for d in defs:
        params = d["function"]["parameters"]
        assert d["type"] == "function" and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", d["function"]["name"])
        assert set(params["required"]) <= set(params["properties"])


def test_text_search_returns_exact_excerpts_with_locations(potter) -> None:
    tools = tools_for(potter)
    hits = tools.text_search("camomile tea")
    store = next(iter(potter[0].values()))
    assert hits and "camomile" in hits[0].text.lower()
    assert store.chapter_text(hits[0].chapter_id)[hits[0].start : hits[0].end] == hits[0].text
    full = tools.chunk(f"{hits[0].book_id}/{hits[0].chunk_id}")
    assert full.text == hits[0].text


def test_chapter_summary_is_made_once_and_cached(potter) -> None:
    tools = tools_for(potter)
    chapter_id = tools.text_search("camomile tea")[0].chapter_id
    summary = tools.chapter_summary(chapter_id)
    assert summary and summary == tools.chapter_summary(chapter_id)
    assert tools.budget.calls.count("chapter_summary.get") == 2
    first_sentence = summary.split(". ")[0]
    assert first_sentence.split()[0] in next(iter(potter[0].values())).chapter_text(chapter_id)


def test_extractive_summary_keeps_central_sentences_in_order() -> None:
    text = (
        "The rabbit ran to the garden. The rabbit ate lettuce in the garden. "
        "It was a sunny day. The farmer chased the rabbit out of the garden."
    )
    summary = extractive_summary([text + " The day was long and quiet and sunny for everyone there."], n=2)
    assert summary == "The rabbit ran to the garden. The rabbit ate lettuce in the garden."


def test_scope_uses_only_specific_concepts() -> None:
    narrow = ConceptMatch("entity", "e1", "Peter", 1.0, ("c1", "c2"))
    broad = ConceptMatch("entity", "e2", "Ahab", 1.0, tuple(f"x{i}" for i in range(24)))
    assert scope_chapters([("b", ConceptMatches("q", (narrow,), (), (), ()))], 8) == ("c1", "c2")
    assert scope_chapters([("b", ConceptMatches("q", (broad,), (), (), ()))], 8) is None


def test_a_wrong_scope_never_hides_the_best_hit_of_the_whole_book(potter) -> None:
    tools = tools_for(potter)
    store = next(iter(potter[0].values()))
    wrong = next(  # a chapter without tea, camomile or Peter
        c["chapter_id"]
        for c in store.descriptor["chapters"]
        if not re.search(r"camomile|tea|peter", store.chapter_text(c["chapter_id"]), re.I)
    )
    question = "Who gave Peter camomile tea at bedtime?"
    found = _book_hits(tools, question, (wrong,), 10, 0.1)
    assert found.scope == (wrong,) and "camomile" in found.hits[0].text.lower()
    route = RouteDecision("BOOK", 1.0, (question,), tuple(potter[0]), "", question)
    evidence = _judged(tools, route, "concrete", found, 10, 0.5, 0.5)
    assert evidence.sufficient and not evidence.widened
    assert tools.budget.used == 2  # one hybrid search: its lexical and its semantic list


class FakeTools:
    """Book tools whose searches return fixed texts (the escalation's logic, without an index)."""

    def __init__(self, texts: dict[str, list[str]], budget: int = 8) -> None:
        self.encoder = None  # no alias by meaning
        self.stores: dict = {}  # no book titles
        self.texts = texts
        self.budget = ToolBudget(budget)
        self.queries: list[str] = []

    def search(self, query: str, scope=None, k=None) -> BookHits:
        self.budget.spend("text_search")
        self.queries.append(query)
        hits = tuple(
            _h(f"{query}-{i}", "c1", 1.0 - i / 10, t) for i, t in enumerate(self.texts.get(query, []))
        )
        return BookHits(query, hits, hits, (), None, (f"search({query!r})",))

    def fusion(self, lexical, semantic, k):  # lexical hits only: nothing to fuse
        return tuple(lexical[:k])


def test_insufficient_evidence_escalates_once_with_the_routers_suggested_queries() -> None:
    question = "Who is the Grey Lady?"
    tools = FakeTools({"ghost of the manor": ["The Grey Lady walked the halls of the manor at night."]})
    found = tools.search(question)
    route = RouteDecision("BOOK", 0.9, (question, "ghost of the manor", "Grey Lady"), ("b",), "LLM", question)
    evidence = _judged(tools, route, "concrete", found, 10, 0.5, 0.9)  # type: ignore[arg-type]
    assert tools.queries == [question, "ghost of the manor", "Grey Lady"]  # the clause is not searched twice
    assert evidence.widened and evidence.sufficient
    assert any("suggested queries once" in n for n in evidence.notes)
    assert "Grey Lady" in evidence.hits[0].text


def test_a_respelling_that_does_not_help_still_escalates_to_the_suggested_queries() -> None:
    question = "Where was Mitthens hiding?"
    jar = "The first thing they found was Mittens, hiding in an empty jar."
    tools = FakeTools({question: ["Mittens ran. Mittens laughed."], "Mittens in the empty jar": [jar]})
    route = RouteDecision("BOOK", 0.9, (question, "Mittens in the empty jar"), ("b",), "LLM", question)
    evidence = _judged(tools, route, "concrete", tools.search(question), 10, 0.5, 0.9)  # type: ignore[arg-type]
    # the book's spelling searched first (nothing there), then the router's query as before
    assert tools.queries == [question, "Where was Mittens hiding?", "Mittens in the empty jar"]
    assert evidence.widened and evidence.sufficient and evidence.aliases == ()
    assert jar in [h.text for h in evidence.hits]  # merged after what the clause found


def test_without_suggested_queries_insufficient_evidence_is_final() -> None:
    question = "Who is the Grey Lady?"
    tools = FakeTools({question: ["Nothing here about ladies."]})
    route = RouteDecision("BOOK", 0.9, (question,), ("b",), "", question)
    evidence = _judged(tools, route, "concrete", tools.search(question), 10, 0.5, 0.9)  # type: ignore[arg-type]
    assert not evidence.widened and not evidence.sufficient and tools.queries == [question]
    assert evidence.missing_names == ("Grey Lady",)


def test_whole_book_search_is_never_widened(potter) -> None:
    tools = tools_for(potter)
    evidence = _whole_book_evidence(tools, "quantum chromodynamics lattice", 10, 0.5, 0.9)
    assert not evidence.widened and not evidence.sufficient
    assert tools.budget.used == 2


class BrokenEncoder:
    def encode_query(self, text: str):
        raise RuntimeError("vector index unavailable")


def test_failing_semantic_search_degrades_to_lexical_only(potter) -> None:
    tools = tools_for(potter, encoder=BrokenEncoder())
    evidence = _whole_book_evidence(tools, "Why did Peter lose his jacket?", 10, 0.5, 0.5)
    assert SEMANTIC_UNAVAILABLE in evidence.notes
    assert evidence.hits and tools.semantic_error == "RuntimeError: vector index unavailable"


def test_missing_encoder_is_lexical_only(potter) -> None:
    tools = tools_for(potter, encoder=None)
    evidence = _whole_book_evidence(tools, "Who chased Peter in the garden?", 10, 0.5, 0.5)
    assert SEMANTIC_UNAVAILABLE in evidence.notes and evidence.sufficient


# --- the evidence rule: names held, a passage that reads like the question ------------------------


def test_names_are_capitalised_runs_without_the_sentence_capital() -> None:
    assert names_in("How did Captain Hook lose his hand?") == (("Captain", "Hook"),)
    assert names_in("Describe the wolf") == ()
    assert names_in("What did Peter Rabbit's mother give him?") == (("Peter", "Rabbit"),)


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        ("jemina", "jemima", True),  # a letter changed
        ("mitthens", "mittens", True),  # a letter added
        ("ribby", "riby", True),  # a letter dropped
        ("issac", "isaac", True),  # two letters swapped
        ("lucdina", "lucinda", False),
        ("dracula", "drac", False),
    ],
)
def testone_edit(a: str, b: str, near: bool) -> None:
    assert one_edit(a, b) is near


CAPTAIN = "The captain hung his hat on one of the iron hooks by the door, and the Captain sat down."


@pytest.mark.parametrize(
    ("question", "texts", "missing"),
    [
        ("How did Captain Hook lose his hand?", [CAPTAIN], ("Captain Hook",)),  # words, not the name
        ("Who is Count Dracula?", [CAPTAIN], ("Count Dracula",)),
        (
            "What work did the Red-Headed League pay Jabez Wilson to do?",
            ["The Redheaded League was founded for red-headed men. Jabez Wilson copied."],
            (),
        ),
        ("Why did the clothes come off the Puddle-Ducks?", ["the three Puddle-ducks came along"], ()),
        ("What did Jemina Puddle-duck see?", ["Jemima Puddle-duck was a simpleton"], ()),  # one slip
        ("Whom does Elizabeth Bennet marry?", ["Elizabeth wore a bonnet."], ("Elizabeth Bennet",)),
        ("Who killed Tybalt?", [], ("Tybalt",)),
        ("what did the wolf eat?", [CAPTAIN], ()),  # no names: nothing to hold
        # one text must hold the whole name (seen: Long John Silver's parrot "held" by a Grimm chunk's
        # "silver" and a Moby-Dick chunk's "Long" and "John")
        ("What did Long John Silver say?", ["Long John rose.", "Silver was there."], ("Long John Silver",)),
        ("What did Long John Silver say?", ["Silver spoke.", "Long John Silver spoke."], ()),
        # a month as older books abbreviate it (Potter's Ginger and Pickles: the refusal said "Not in the
        # books searched: January 1st"); another month, or a lower-case word, is no such spelling
        ("What happened when January 1st came?", ["When it came to Jan. 1st there was no money"], ()),
        ("What happened when January 1st came?", ["When it came to June 1st"], ("January 1st",)),
        ("Who came in September?", ["In Sept. the rain came"], ()),
        ("Who came in March?", ["They mar the view."], ("March",)),
        ("Where did Lucdina shop?", ["Lucinda and Jane Doll-cook"], ()),  # a letter moved: still the name
        ("Where did Lucdiba shop?", ["Lucinda and Jane Doll-cook"], ("Lucdiba",)),
    ],
)
def testmissing_names(question: str, texts: list[str], missing: tuple[str, ...]) -> None:
    assert missing_names(question, texts) == missing


ROLY_POLY = (
    "The first thing they found was Mittens, hiding in an empty jar. They tipped over the jar, and she "
    'scrambled out. "Oh, Mother, Mother!" said Mittens.'
)

TOM_KITTEN = '"I am affronted," said Mrs. Tabitha Twitchit. Then Tabitha Twitchit came down the garden.'


@pytest.mark.parametrize(
    ("question", "texts", "spelt"),
    [
        ("Where was Mitthens hiding in?", [ROLY_POLY], (("Mitthens", "Mittens"),)),  # a letter added
        ("What did Jemina Puddle-duck see?", ["Jemima Puddle-duck was a simpleton"], (("Jemina", "Jemima"),)),
        ("Where was Mittens hiding?", [ROLY_POLY], ()),  # written as asked: nothing to respell
        # cut short, with the name's other word as the book writes it
        ("Why was Mrs. Tabitha Twitch affronted?", [TOM_KITTEN], (("Twitch", "Twitchit"),)),
        ("Why was Twitch affronted?", [TOM_KITTEN], ()),  # cut short and alone: left as asked
        # a letter moved in a name of 7+ letters (FairytaleQA's "Lucdina" was refused: "Not in the books
        # searched: Lucdina"); two other slips, or a moved letter in a shorter name, are left as asked
        ("Where did Lucdina buy her groceries?", ["Lucinda and Jane"], (("Lucdina", "Lucinda"),)),
        ("Where did Lucdiba buy her groceries?", ["Lucinda and Jane"], ()),
        ("Where did Mablre go?", ["Marble and Jane"], ()),
        ("Whom does Elizabeth Bennet marry?", ["Bonnets! She tied her bonnet; a bonnet."], ()),  # no name
        ("What did Anna say?", ["Anne spoke."], ()),  # under five letters: a slip may be another name
        ("what did the wolf eat?", [ROLY_POLY], ()),  # no names
    ],
)
def test_respellings_find_the_books_spelling_of_a_name_asked_with_one_slip(
    question: str, texts: list[str], spelt: tuple[tuple[str, str], ...]
) -> None:
    assert respellings(question, texts) == spelt


PETER = (
    "And then, feeling rather sick, he went to look for some parsley. But round the end of a cucumber "
    "frame, whom should he meet but Mr. McGregor! The parsley grew by the house; the house was small."
)


@pytest.mark.parametrize(
    ("question", "texts", "spelt"),
    [
        ("Why was Peter looking for some parsely?", [PETER], (("parsely", "parsley"),)),  # two swapped
        ("How did the fawn feel when he left the hosue?", [PETER], (("hosue", "house"),)),
        (
            "How do they recognise each other?",
            ["They recognize them; we recognize it."],
            (("recognise", "recognize"),),
        ),
        (
            "What did the puppiess do?",
            ["The puppies rushed in. Both the puppies were limping."],
            (("puppiess", "puppies"),),
        ),
        ("What yearly income had he?", ["He came early. Very early."], ()),  # a slip in the first two letters
        (
            "Why did he look for parsely?",
            ["He went to look for some parsley."],
            (),
        ),  # written once: no evidence
        ("Why did he look for parsley?", [PETER], ()),  # written as asked
        ("Where was Mitthens hiding in?", ["Mittens hid; Mittens hid."], ()),  # a name: ``respellings``
        ("Who went down the raod?", ["the road, the road"], ()),  # under five letters
        ("What did the cock build?", [PETER], ()),  # nothing near
        (
            "Why did the Queen want to behaed Alice?",
            ["They were beheaded. Fond of beheading people; all beheaded."],
            (("behaed", "beheaded"),),
        ),  # a slip of the stem the texts write only with endings: their most frequent form
        (
            "Why did the Queen want to behaed Alice?",
            ["The Queen had them beheaded at once."],
            (),
        ),  # the stem's forms written once in all: no evidence
        ("What did the barber do?", ["The barbers barbered; more barbering."], ()),  # the stem as asked
    ],
)
def test_word_respellings_find_the_evidences_spelling_of_a_word_asked_with_one_slip(
    question: str, texts: list[str], spelt: tuple[tuple[str, str], ...]
) -> None:
    assert word_respellings(question, texts) == spelt


class HoldingStore:
    """A book that holds some words (``BookStore.holds_phrase``) and has no title."""

    def __init__(self, words: set[str]) -> None:
        self.words = words
        self.descriptor: dict = {}

    def holds_phrase(self, text: str) -> bool:
        return text.lower() in self.words


@pytest.mark.parametrize("case", ["slip", "held", "unhelpful"])
def test_a_word_asked_with_a_slip_is_searched_as_the_evidence_writes_it(case: str) -> None:
    question = "Where was the Swallow headed?"
    heeded = "He heeded nothing; he heeded the Prince. The Swallow flew to Egypt."
    respelled = "Where was the Swallow heeded?"
    found = ["The Swallow heeded the Prince and stayed."] if case != "unhelpful" else ["Nothing here."]
    tools = FakeTools({question: [heeded], respelled: found})
    tools.stores = {"b": HoldingStore({"headed"} if case == "held" else set())}
    route = RouteDecision("BOOK", 0.9, (question,), ("b",), "", question)
    evidence = _judged(tools, route, "concrete", tools.search(question), 10, 0.5, 0.9)  # type: ignore[arg-type]
    if case == "slip":
        assert tools.queries == [question, respelled]
        assert evidence.aliases == (("headed", "heeded"),) and evidence.sufficient
        assert 'Read "headed" as "heeded"' in evidence.notes
        assert evidence.hits[0].text == "The Swallow heeded the Prince and stayed."
        assert evidence.searched == (f"search({question!r})", f"search({respelled!r})")
        return
    # a real word of the library that the evidence lacks is no slip (searched once, as asked); a respelling
    # whose search is no sufficient evidence leaves the clause as asked
    assert tools.queries == ([question] if case == "held" else [question, respelled])
    assert evidence.aliases == () and not any(n.startswith("Read ") for n in evidence.notes)
    assert evidence.hits[0].text == heeded


def test_renamed_puts_the_books_names_in_the_clause() -> None:
    assert (
        renamed("Where was Mitthens hiding in?", [("Mitthens", "Mittens")]) == "Where was Mittens hiding in?"
    )
    red = [("Little Red Riding Hood", "Little Red-Cap")]
    assert (
        renamed("How did the wolf trick little red  riding-hood?", red)
        == "How did the wolf trick Little Red-Cap?"
    )
    assert renamed("Did Mitthensen come?", [("Mitthens", "Mittens")]) == "Did Mitthensen come?"  # whole words


def _hit(text: str, score: float) -> Hit:
    return Hit("b", "c", "T", "k", 0, len(text), score, text)


def test_sufficient_needs_names_held_and_a_passage_like_the_question() -> None:
    peter = _hit(
        "His mother put him to bed, and made some camomile tea; she gave a dose of it to Peter!", 0.6
    )
    question = "What did Peter's mother give him when he was ill?"
    assert sufficient(question, [peter], [peter], 0.8, 0.44)
    weak = _hit(peter.text, 0.40)
    assert not sufficient(question, [weak], [weak], 0.8, 0.44)  # neither similar enough nor 80% of the words
    assert sufficient("Who put Peter to bed?", [weak], [weak], 0.8, 0.44)  # every word there
    assert not sufficient("What did Jane Eyre give Peter?", [peter], [peter], 0.8, 0.44)  # a name not held
    assert not sufficient(question, [], [], 0.8, 0.44)  # nothing retrieved


def test_sufficient_reads_irregular_forms_as_their_base() -> None:
    # FairytaleQA's "Why did Mittens fall of the wall?", refused before: "fell" did not cover "fall"
    wall = _hit("Mittens laughed so that she fell off the wall. Moppet and Tom descended after her.", 0.40)
    assert sufficient("Why did Mittens fall of the wall?", [wall], [wall], 0.8, 0.44)
    beetle = _hit("A great big water-beetle came up underneath the lily leaf and tweaked his toe.", 0.40)
    assert sufficient("Who come up underneath the lily leaf?", [beetle], [beetle], 0.8, 0.44)  # "came"
    assert not sufficient("Who went up the lily stalk?", [beetle], [beetle], 0.8, 0.44)
    # either way: the question's past form and the text's base form ("Who gave" / "to give")
    assert (
        lemma_coverage(lemma_stems("Who gave the Queen a tart?"), "She would give the Queen a tart.") == 1.0
    )
    assert lemma_coverage(lemma_stems("Who gave the Queen a pie?"), "She would give the Queen a tart.") < 1.0


def test_sufficient_needs_no_words_of_how_the_question_is_asked() -> None:
    # FairytaleQA's "What kind of things often disappeared at night?", refused in Potter's book before:
    # "kind" and "often" are how it asks; 3 of its 5 words were held (0.6), the similarity 0.42
    wainscot = _hit(
        "Certainly there were odd little jagged doorways in the wainscot, and things disappeared at night-- "
        "especially cheese and bacon.",
        0.42,
    )
    assert asked_frame("What kind of things often disappeared at night?") == {"kind", "often"}
    assert sufficient("What kind of things often disappeared at night?", [wainscot], [wainscot], 0.8, 0.44)
    assert sufficient("What sort of things usually disappeared at night?", [wainscot], [wainscot], 0.8, 0.44)
    # "kind" as a word of its own, and the other words, still count
    assert asked_frame("Was the kind old woman at home?") == frozenset()
    assert not sufficient(
        "What kind of cheese often disappeared from the dairy?", [wainscot], [wainscot], 0.8, 0.44
    )
    # a hit holding all but one of the other words is judged on all of them ("sort" and "usually" too):
    # Sherlock Holmes's "grand gift of silence" stayed a refusal on the demo library
    silence = _hit("You have a grand gift of silence, said the little man; ask for nothing.", 0.40)
    assert not sufficient(
        "What sort of gift did the little man usually ask for in return?", [silence], [silence], 0.8, 0.44
    )
    assert asked_frame("How often?") == {"often"}  # nothing else asked: the words as they are
    assert not sufficient("How often?", [wainscot], [wainscot], 0.8, 0.44)


def test_sufficient_needs_no_quantifier_the_question_asks_with() -> None:
    # books27_dev's "How did the Queen settle every difficulty?" was refused: Alice's chunk says "all
    # difficulties", so 3 of its 4 words were held (0.75), the similarity under the threshold
    queen = _hit(
        "The Queen had only one way of settling all difficulties, great or small. 'Off with his head!' "
        "The moment Alice appeared, she was appealed to by all three to settle the question.",
        0.40,
    )
    assert sufficient("How did the Queen settle every difficulty?", [queen], [queen], 0.8, 0.44)
    assert sufficient("Did the Queen ever settle a difficulty?", [queen], [queen], 0.8, 0.44)
    # the other words still count: "every" is forgiven only to a passage holding all else
    assert not sufficient("How did the Queen settle every quarrel?", [queen], [queen], 0.8, 0.44)
    assert asked_frame("How did the Queen settle every difficulty?") == frozenset()  # the reader counts it


def test_lexical_only_evidence_is_judged_by_words() -> None:
    peter = _hit(
        "His mother put him to bed, and made some camomile tea; she gave a dose of it to Peter!", 3.0
    )
    assert sufficient("What did Peter's mother give him?", [peter], [], 0.8, 0.44)
    assert not sufficient("What did Peter eat at the fair in town?", [peter], [], 0.8, 0.44)


@pytest.mark.parametrize(
    ("clause", "pronoun"),
    [("where is his castle", "his"), ("why did they leave", "they"), ("where is Oz", None), ("where", None)],
)
def test_a_clause_without_names_refers_back_by_its_pronoun(clause: str, pronoun: str | None) -> None:
    assert refers_back(clause) == pronoun


def test_a_clause_pointing_back_to_missing_names_is_insufficient_too() -> None:
    castle = _hit("The knights rode to the castle.", 0.6)
    missing = BookEvidence((castle,), "concrete", None, (), False, missing_names=("Count Dracula",))
    found = BookEvidence((castle,), "concrete", None, (), True)
    first, second = _names_carried(["Who is Count Dracula", "where is his castle"], [missing, found])
    assert first is missing and not second.sufficient and second.missing_names == ("Count Dracula",)
    assert second.notes == ('Not in the books searched: Count Dracula ("his" in "where is his castle")',)
    # a clause after one whose names were held, or one with a name of its own, keeps its evidence
    held = BookEvidence((castle,), "concrete", None, (), True)
    assert _names_carried(["Who is the king", "where is his castle"], [held, found])[1] is found
    assert _names_carried(["Who is Count Dracula", "where is Oz"], [missing, found])[1] is found


OFF_LIBRARY = [  # none of Grimm, Potter and Children's Literature holds these
    "Who is Count Dracula?",
    "How did Captain Hook lose his hand?",
    "How does photosynthesis turn sunlight into sugar?",
    "Who killed Tybalt?",
    "Who was the chief mate of the Pequod?",
    "Who is Count Dracula and where is his castle?",  # Children's Literature has knights in a castle
]
IN_LIBRARY = [
    "What did Peter's mother give him when he was ill?",
    "How did the queen find out the little man's name was Rumpelstiltskin?",
    "What did the Queen put under the mattresses to test the princess?",
    "What had the gallant tailor stitched on his belt?",
]


def test_off_library_questions_are_refused_and_in_library_ones_answered(fairytale_library: Path) -> None:
    from folio.dataflows.asking import ask

    for question in OFF_LIBRARY:
        answer = ask(question, library=fairytale_library, config={"llm": "none"})
        assert answer.answer.startswith(NOT_FOUND) and not answer.citations, question
    answer = ask("Who killed Tybalt?", library=fairytale_library, config={"llm": "none"})
    assert "Not in the books searched: Tybalt" in answer.notes
    for question in IN_LIBRARY:
        answer = ask(question, library=fairytale_library, config={"llm": "none"})
        assert not answer.answer.startswith(NOT_FOUND) and answer.citations, question


def test_the_agents_tools_allow_one_widening_as_the_pipeline(potter) -> None:
    tools = tools_for(potter).escalating(1)
    chapter = next(iter(next(iter(potter[0].values())).titles))
    tools.text_search("Peter", [chapter])
    tools.search("Peter")  # the one widening: a whole-book search after a scoped one
    tools.semantic_search("Peter", [chapter])
    with pytest.raises(WideningRefused, match="already widened to the whole book"):
        tools.text_search("Peter")
    refused = json.loads(tools.call("search", {"query": "Peter"}))
    assert "already widened" in refused["error"]
    assert tools.budget.calls == ["text_search", "text_search", "semantic_search", "semantic_search"]
    free = tools_for(potter)  # the pipeline's and the MCP server's tools: no such limit
    for _ in range(2):
        free.text_search("Peter", [chapter])
        free.text_search("Peter")


@pytest.mark.parametrize(
    ("asked", "own", "variant"),
    [
        ("recognise", "recognize", True),
        ("organized", "organised", True),
        ("colour", "color", True),
        ("neighbours", "neighbors", True),
        ("scare", "scarce", False),
        ("build", "built", False),
        ("reset", "rest", False),
        ("rose", "roze", True),  # any one s for z
        ("house", "house", False),
    ],
)
def test_spelling_variants_are_one_word_in_british_and_american_spelling(
    asked: str, own: str, variant: bool
) -> None:
    assert spelling_variant(asked, own) is variant
