"""Answer types: what a question asks for, and whether a sentence holds a thing of that type.

The reader (``nodes/core/reading.py``) adds ``type_cue`` to its kind cue, so that inside the right chapter or
article the sentence holding an answer of the asked type wins over one that only repeats the question's
words (an article's lead, a chapter's sentence that names the subject). Cues that hold for any question:

- ``named``: "which museum / river / lake ..." (``head``: the noun after which / what, singular) wants a
  name ending or starting with that noun ("the British Museum", "Lake Mead", "River Tame");
- ``year``: "in what year / which year / what date / when" wants a year (three or four digits, 1000-2100, or a
  decade "1950s") or a full date;
- ``amount``: "how much / how many / how long / how old / what percentage / what share / what was the
  population" wants an amount: digits, a number word, "%" or a fraction;
- ``price``: "how much" with a word of paying ("pay", "cost", "earn", "worth", ...) wants a sum of money
  ("£4", "four pounds", "a guinea", "ten dollars"), not any number: "It took two years to make" holds
  an amount but no price;
- ``duration``: "how long did / does / can ..." wants a span of time ("five hours", "a week", "three
  days"), not any number ("how long are the sides" asks for a length and stays ``amount``);
- ``name``: "what is the name of / what was X called / who" wants a proper name the question does not
  hold (a capitalised word that does not open the sentence);
- ``place``: "where" wants a capitalised name after a place preposition ("in Australia", "at
  Balmoral", "from Trier", "off Japan").

``asks_event(question)``: "What happened ...?", "What did X do ...?" ask for an event, which a sentence tells
by going on: the reader weighs a unit's length for them (``reading.EVENT_LENGTH_WEIGHT``).
``asks_what_name_is(question)``: "Who is Irene Adler?", "What are the Morlocks?" ask what a name is, which a
book tells where it introduces it: the reader reads the best chapter's evidence in reading order for them,
and ``introduces(asked_name(question), sentence)`` tells a sentence that introduces the name ("His name is
Hugh Boone", "a frog called Mr. Jeremy Fisher", "the well-known adventuress, Irene Adler") from one that
only mentions it ("So the Morlocks thought.").

A leading clause that sets the question's context is not read (``asked_clause``): "According to the old
Gay-Head Indian, where did Ahab lose his leg?" asks for a place.

``answer_type(question)`` returns an ``AnswerType`` (``kind`` "" when none applies); ``type_cue(t,
text, question_words)`` is 1.0 when the text holds such an answer that is not one of the question's own
words, else 0.0.

Config keys: none. Limitations: English cues; a name is a capitalised word, so lower-case answers
("a pig", "camphor") get no type cue; "when" questions about an event in a story ("When did Alice...")
get the year cue, which story text rarely holds (the cue then never fires and changes nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from folio.nodes.core.text import STOPWORDS, base_word, fold, words

NUMBER_WORDS = frozenset(
    [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "trillion",
        "dozen",
        "half",
        "quarter",
        "third",
    ]
)
_GENERIC_HEADS = frozenset(
    [
        "one",
        "thing",
        "things",
        "kind",
        "sort",
        "type",
        "way",
        "part",
        "name",
        "people",
        "person",
        "man",
        "woman",
        "animal",
        "animals",
    ]
)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b|\b[1-9][0-9]{2}\s*(?:AD|BC|BCE|CE)\b")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b(?:{_MONTHS})\s+[0-9]{{1,2}}\b|\b[0-9]{{1,2}}\s+(?:{_MONTHS})\b")
_DIGITS = re.compile(r"\d")
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]+)")
_PLACE = re.compile(r"\b(?:in|at|from|near|on|to|into|off)\s+(?:the\s+)?([A-Z][\w'’-]+)")
_AMOUNT_ASK = re.compile(
    r"^(?:how (?:much|many|long|old|far|big|tall|high|large)\b|what (?:percentage|share|proportion|"
    r"fraction|number)\b|what (?:is|was) the (?:population|number|size|length|height|area)\b)"
)
PAYING_WORDS = (  # a "how much" question with one of these asks for a price
    "pay pays paid paying cost costs costing charge charges charged spend spends spent earn earns earned "
    "sell sells sold buy buys bought price priced worth wage wages salary fee fees owe owes owed rent "
    "reward rewarded fine fined"
)
PAYING = frozenset(PAYING_WORDS.split())
_DURATION_ASK = re.compile(r"^how long (?:did|does|do|can|could|will|would|should|had|has|have|must|might)\b")
_NUMBER = r"\d[\d,.]*|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
# units of money a number must come before ("five crowns", not "a crown": a king's)
_MONEY_UNITS = (
    r"pounds?|shillings?|pence|pennies|penny|guineas?|sovereigns?|crowns?|florins?|farthings?|dollars?|"
    r"cents?|francs?|ducats?|groats?|guilders?|euros?|rupees?|roubles?|rubles?|marks?|livres?|piastres?"
)
_MONEY = re.compile(
    rf"[£$€¥]\s?\d|\d\s?[£$€¥]|\b(?:{_NUMBER}|a few|some)\s+(?:[a-z-]+\s+)?(?:{_MONEY_UNITS})\b"
    r"|\b(?:a|an|one|half a)\s+(?:pound|shilling|penny|guinea|dollar|franc|florin|farthing)\b",
    re.IGNORECASE,
)
_TIME_UNITS = (
    r"seconds?|minutes?|hours?|days?|nights?|weeks?|fortnights?|months?|years?|decades?|centur(?:y|ies)"
)
_DURATION = re.compile(
    rf"\b(?:{_NUMBER}|an?|half an?|several|many|some|a few|a couple of)\s+(?:[a-z-]+\s+)?(?:{_TIME_UNITS})\b",
    re.IGNORECASE,
)
_YEAR_ASK = re.compile(
    r"^(?:(?:in )?(?:what|which) year\b|(?:on |at )?(?:what|which) date\b|when\b|since when\b)"
)
_NAME_ASK = re.compile(
    r"^(?:what (?:is|was|were|are) the names? of\b|who\b|(?:(?:to|for|with|by|from|of) )?whom\b"
    r"|what (?:is|was|were|are) \w+(?: \w+)? called\b|what did \w+(?: \w+)? call\b|by what name\b)"
)
_WHICH = re.compile(r"^(?:(?:in|on|at|from|to|into|with|by|of) )?(?:which|what) ([a-z]+)(?: ([a-z]+))?")


@dataclass(frozen=True)
class AnswerType:
    """What a question asks for: ``kind`` (named / year / amount / price / duration / name / place, ""
    for none) and, for ``named``, the ``head`` noun the name ends or starts with."""

    kind: str = ""
    head: str = ""


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


_WH = re.compile(
    r"^(?:(?:in|on|at|from|to|into|with|by|of|for) )?(?:what|which|where|who|whom|whose|when|why|how)\b"
)


def asked_clause(question: str) -> str:
    """The question without a leading clause that sets its context: "According to the old Gay-Head Indian,
    where did Ahab lose his leg?" asks "where did Ahab lose his leg?"; "When Darcy met Elizabeth again,
    on what date ..." asks "on what date ..."; a question that opens with its wh-word is itself."""
    head, comma, rest = question.partition(",")
    if not comma or _WH.match(" ".join(words(head))):
        return question
    rest = rest.strip()
    return rest if _WH.match(" ".join(words(rest))) else question


def answer_type(question: str) -> AnswerType:
    """The answer type a question asks for (see the module docstring), read from its ``asked_clause``."""
    q = " ".join(words(asked_clause(question)))
    if _YEAR_ASK.match(q):
        return AnswerType("year")
    if q.startswith("how much ") and PAYING & set(q.split()):
        return AnswerType("price")
    if _DURATION_ASK.match(q):
        return AnswerType("duration")
    if _AMOUNT_ASK.match(q):
        return AnswerType("amount")
    if _NAME_ASK.match(q):
        return AnswerType("name")
    if q.startswith("where "):
        return AnswerType("place")
    m = _WHICH.match(q)
    if m:
        head = m.group(1)
        if head in ("year", "decade", "century"):
            return AnswerType("year")
        if head not in STOPWORDS and head not in _GENERIC_HEADS and head not in NUMBER_WORDS:
            return AnswerType("named", _singular(head))
    return AnswerType()


_EVENT_ASK = re.compile(
    r"^what (?:happened|happens|will happen|would happen|has happened|had happened)\b"
    r"|^what (?:did|does|do|will|would|could|should|can|must)\b(?:(?!\b(?:could|can) do\b).)*\bdo\b"
)


def asks_event(question: str) -> bool:
    """Whether the question asks what happened or what someone did ("What happened to Mr. Korbes at the
    end?", "What did old Mrs. Rabbit do with the onions?", "What did they decide to do?"), not what someone
    can do ("What did the miller tell the king his daughter could do?"), read from its ``asked_clause``."""
    return bool(_EVENT_ASK.search(" ".join(words(asked_clause(question)))))


# "Who is Irene Adler?", "What are the Morlocks?", "Who was Mrs. Tiggy-winkle, whom Lucie met?": what / who
# is, was, are or were, then capitalised words alone (up to a comma or the end)
_WHAT_NAME_IS = re.compile(
    r"(?i:(?:who|what)\s+(?:is|was|are|were)\s+(?:the\s+)?)((?:[A-Z][\w'’.-]*\s*)+)(?:,.*|[?.!])?\s*$"
)


def asks_what_name_is(question: str) -> bool:
    """Whether the question asks what (or who) a name is and nothing else ("Who is Irene Adler?", "What are
    the Morlocks?"), read from its ``asked_clause``: not "Who is the ruler of Lineland?" nor "Who is Mr.
    Collins to Mr. Bennet?"."""
    return bool(asked_name(question))


def asked_name(question: str) -> str:
    """The name a question asking what a name is asks about ("Who is the Mock Turtle?" -> "Mock Turtle"),
    "" for any other question."""
    m = _WHAT_NAME_IS.match(asked_clause(question).strip())
    return m.group(1).strip().rstrip(".").strip() if m else ""


# the name introduced: "the well-known adventuress, Irene Adler"; "His name is Hugh Boone"; "the boy's name
# was Hansel"; "the Morlocks—that, by the bye, was the name by which these creatures were called"; "said
# Filby, an argumentative person"; "Irene Adler was a ..."; "a little man called Rumpelstiltskin"
_INTRODUCING = (
    r"\b(?:name|names|called|named|known as)\b[^.;:!?]{{0,12}}?\b{name}\b",
    r"\b{name}\b[’'”\"]?\s*[-—–,(]+[^.;!?]{{0,30}}?\b(?:name|names|called|named)\b",
    r"\b{name}\b,\s*(?:a|an|the)\s",  # not "'Collar that Dormouse,' the Queen shrieked"
    r"\b{name}\b[’'”\"]?\s+(?:is|was|are|were)\s+(?:a|an|the|one)\s",
)
# "the well-known adventuress, Irene Adler": the words between the article and the name are no function words
# (not "the coast was clear, Peter Rabbit and Benjamin Bunny came out")
_APPOSITIVE = r"\b(?:a|an|the)\s+((?:[\w-]+\s+){{0,2}}[\w-]+),\s*[‘'“\"]?{name}\b"


def introduces(name: str, text: str) -> bool:
    """Whether ``text`` introduces ``name``: names it with a noun beside it, or says that it is its name
    (``_INTRODUCING``), where a question asking what a name is finds its answer."""
    if not name:
        return False
    escaped = r"\s+".join(re.escape(w) for w in name.split())
    if any(re.search(p.format(name=escaped), text, re.IGNORECASE) for p in _INTRODUCING):
        return True
    return any(
        not any(w in STOPWORDS for w in words(m.group(1)))
        for m in re.finditer(_APPOSITIVE.format(name=escaped), text, re.IGNORECASE)
    )


def _own(word: str, question_words: frozenset[str]) -> bool:
    """The word (possessive or not: "Traveller's") is one of the question's words (or a stop word)."""
    folded = base_word(fold(word))
    return folded in STOPWORDS or folded in question_words or folded in {base_word(w) for w in question_words}


def _names(text: str, question_words: frozenset[str]) -> list[str]:
    """Capitalised words of the text that do not open a sentence and are not the question's words."""
    return [w for w in _CAPITAL.findall(text) if not _own(w, question_words)]


def type_cue(answer: AnswerType, text: str, question_words: frozenset[str]) -> float:
    """1.0 when ``text`` holds an answer of the asked type that the question does not already hold."""
    kind = answer.kind
    if not kind:
        return 0.0
    if kind == "year":
        return 1.0 if _YEAR.search(text) or _DATE.search(text) else 0.0
    if kind == "amount":
        ws = words(text)
        return 1.0 if _DIGITS.search(text) or any(w in NUMBER_WORDS for w in ws) else 0.0
    if kind == "price":
        return 1.0 if _MONEY.search(text) else 0.0
    if kind == "duration":
        return 1.0 if _DURATION.search(text) else 0.0
    if kind == "name":
        return 1.0 if _names(text, question_words) else 0.0
    if kind == "place":
        found = [p for p in _PLACE.findall(text) if not _own(p, question_words)]
        return 1.0 if found else 0.0
    # named: a capitalised name next to the head noun ("Lake Mead", "the Colorado River")
    head = answer.head
    name = r"[A-Z][\w'’-]+"
    pattern = rf"\b{name}(?:\s+{name})*\s+(?i:{head})s?\b|\b(?i:{head})s?\s+(?:of\s+)?{name}"
    for m in re.finditer(pattern, text):
        if any(fold(w) not in question_words for w in re.findall(r"[A-Z][\w'’-]+", m.group(0))):
            return 1.0
    return 0.0
