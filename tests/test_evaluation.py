import json
from dataclasses import replace
from pathlib import Path

import pytest

from folio.nodes.core.types import FolioError, Hit
from folio.nodes.eval.metrics import EvalRecord, GoldSpan, _is_hit, _metrics, qa_items


def _rec(rank, located=True, ms=10.0):
    return EvalRecord("q", "?", located, rank, ms, ())


def test_metrics_on_a_hand_computed_case():
    records = [
        _rec(1, ms=10),
        _rec(3, ms=20),
        _rec(None, ms=30),
        _rec(12, ms=40),
        _rec(None, located=False, ms=0),
    ]
    m = _metrics(records)
    assert m["n"] == 5 and m["located"] == 4
    assert m["hit@1"] == 0.25
    assert m["hit@5"] == 0.5
    assert m["hit@10"] == 0.5
    assert m["mrr@10"] == round((1 + 1 / 3) / 4, 4)
    assert m["p50_ms"] == 25.0  # over the searched (located) questions only


def _h(start, end, chapter="c1", text=""):
    return Hit("b", chapter, "T", "k", start, end, 1.0, text)


def test_chunk_covering_half_the_gold_span_is_a_hit():
    gold = GoldSpan("b", "c1", 100, 200)
    assert _is_hit(_h(150, 400), gold)  # covers exactly half
    assert not _is_hit(_h(151, 400), gold)
    assert not _is_hit(_h(100, 200, chapter="c2"), gold)


def test_quote_gold_needs_the_quote_in_the_chunk():
    gold = GoldSpan("b", "c1", 0, 10, quote="call me ishmael")
    assert _is_hit(_h(0, 5, text="Call me   Ishmael. Some years ago"), gold)
    assert not _is_hit(_h(0, 5, text="Call me Ahab."), gold)


def test_jsonl_questions_are_read(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        json.dumps({"question": "Who?", "book_file": "books/x.txt", "gold_quote": "q", "answers": ["a"]})
        + "\n"
    )
    (item,) = qa_items(str(path))
    assert item.question == "Who?" and item.book_file == "books/x.txt" and item.answers == ("a",)


def test_broken_jsonl_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Who?"}\n')
    with pytest.raises(FolioError, match=r"q\.jsonl:1"):
        qa_items(str(path))


def test_fairytaleqa_file_reads_every_question_with_its_gold_sections(data_dir):
    items = qa_items(str(data_dir / "qa/fairytaleqa/questions.csv"))
    assert len(items) == 365
    assert all(item.passages for item in items)


# --- answers and Kiwix questions -------------------------------------------------------------------

from folio.nodes.core.types import Answer, Citation  # noqa: E402
from folio.nodes.eval.metrics import AnswerCheck, QAItem, _check, _contains_answer  # noqa: E402


def _chk(contained=True, grounded=True, unsupported=False, gold_cited=True, calls=2, ms=10.0):
    return AnswerCheck("a", contained, grounded, unsupported, gold_cited, calls, ms)


def test_answer_metrics_on_a_hand_computed_case():
    records = [
        EvalRecord("1", "?", True, 1, 5.0, (), check=_chk(ms=10)),
        EvalRecord(
            "2", "?", True, None, 5.0, (), check=_chk(contained=False, gold_cited=False, calls=4, ms=20)
        ),
        EvalRecord(
            "3",
            "?",
            True,
            2,
            5.0,
            (),
            check=_chk(contained=None, grounded=None, unsupported=True, calls=3, ms=30),
        ),
        EvalRecord(
            "4", "?", False, None, 0.0, (), check=_chk(grounded=False, gold_cited=False, calls=1, ms=40)
        ),
    ]
    m = _metrics(records)
    assert m["answered"] == 4
    assert m["answer_contained_rate"] == round(2 / 3, 4)  # the question without accepted answers is left out
    assert m["grounded_rate"] == round(2 / 3, 4)  # the answer without citations is left out
    assert m["unsupported_rate"] == 0.25
    assert m["gold_cited_rate"] == round(2 / 3, 4)  # over located questions only
    assert m["tool_calls_mean"] == 2.5
    assert m["answer_p50_ms"] == 25.0


def test_retrieval_only_records_have_no_answer_metrics():
    assert "answered" not in _metrics([_rec(1)])


def test_kiwix_question_is_a_hit_when_its_article_is_cited_even_below_the_top_k():
    cited = EvalRecord("k", "?", True, None, 1.0, (), kind="kiwix", check=_chk(gold_cited=True))
    ranked = EvalRecord("k", "?", True, 7, 1.0, (), kind="kiwix", check=_chk(gold_cited=False))
    m = _metrics([cited, ranked])
    assert m["hit@1"] == 0.5 and m["hit@5"] == 0.5 and m["hit@10"] == 1.0
    assert m["mrr@10"] == round((1 / 7) / 2, 4)  # MRR counts ranks only
    book = EvalRecord("b", "?", True, None, 1.0, (), check=_chk(gold_cited=True))
    assert _metrics([book])["hit@10"] == 0.0  # a cited book chunk is not a retrieval hit


def test_answer_containment_is_normalised_and_on_word_boundaries():
    assert _contains_answer(["The Colorado River."], ["It was built on the colorado   river, in 1931"])
    assert _contains_answer(["a pig"], ["", "it turned into a PIG!"])
    assert not _contains_answer(["pig"], ["a pigeon flew by"])
    assert _contains_answer([], ["anything"]) is None
    assert _contains_answer(["..."], ["anything"]) is None
    # a typographic apostrophe (Alice, Pride and Prejudice) is the typed one, on either side
    assert _contains_answer(["St. Clement's"], ["We were married, you know, at St. Clement\u2019s, because"])
    assert _contains_answer(["Wickham\u2019s lodgings"], ["because Wickham's lodgings were"])


def test_check_grounds_every_citation_and_cites_the_kiwix_gold():
    item = QAItem(
        "k", "Which river?", "", answers=("Colorado River",), gold_zim="wiki", gold_path="A/Hoover_Dam"
    )
    cites = (
        Citation("kiwix", zim="wiki", path="A/Hoover_Dam", title="Hoover Dam"),
        Citation("kiwix", zim="wiki", path="A/Gone", title="Gone"),
    )
    answer = Answer("Which river?", "See [1].", cites, "NOT_BOOK", ("kiwix",), 1)
    texts = {"A/Hoover_Dam": "The dam is on the Colorado River.", "A/Gone": None}
    check = _check(item, None, answer, 12.0, lambda c: texts[c.path], lambda c: None)
    assert check.contained and check.gold_cited and not check.unsupported
    assert check.grounded is False  # one citation does not resolve
    assert check.cited == ("wiki/A/Hoover_Dam", "wiki/A/Gone")


def test_not_found_answer_is_unsupported():
    from folio.nodes.query.answering import NOT_FOUND

    item = QAItem("b", "?", "x.txt", answers=("x",))
    check = _check(
        item,
        None,
        Answer("?", f"{NOT_FOUND}\nSearched: x", (), "BOOK", ("book",), 3),
        1.0,
        lambda c: "",
        lambda c: None,
    )
    assert check.unsupported and check.grounded is None and check.contained is True  # "x" is in "Searched: x"
    assert (
        check.refused and check.in_text is False and check.words == 0
    )  # strict: the refusal holds no answer


def test_kiwix_jsonl_lines_are_read_as_kiwix_questions(tmp_path):
    path = tmp_path / "k.jsonl"
    row = {
        "question": "Which river?",
        "answers": ["Colorado River"],
        "gold_zim": "wiki",
        "gold_path": "A/Hoover_Dam",
    }
    path.write_text(json.dumps(row) + "\n")
    (item,) = qa_items(str(path))
    assert item.kind == "kiwix" and (item.gold_zim, item.gold_path) == ("wiki", "A/Hoover_Dam")


# --- strict answer metrics -------------------------------------------------------------------------

from folio.nodes.core.gold import _quote_span  # noqa: E402
from folio.nodes.core.types import NO_RESULTS, NOT_FOUND  # noqa: E402
from folio.nodes.eval.metrics import (  # noqa: E402
    _answer_lines,
    _answer_text,
    _first_citation_gold,
    _has_duplicate,
    _is_fragment,
    _is_refusal,
    _is_short,
)


def test_answer_text_drops_citation_markers_only():
    assert _answer_text("Starbuck was the chief mate. [1]\nStubb was the second. [2][3]") == (
        "Starbuck was the chief mate.\nStubb was the second."
    )
    assert _answer_text("In 1851 [sic] it sailed.") == "In 1851 [sic] it sailed."


def test_refusal_is_the_not_found_or_no_results_text():
    assert _is_refusal(f"{NOT_FOUND}\nSearched:\n- text_search('x')")
    assert _is_refusal(NO_RESULTS)
    assert not _is_refusal("The whale was white. I could not find support for this in the books.")


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("Call me Ishmael.", False),
        (", Hansel and Grethel, on the land, were glad", True),
        ("and so they lived happily ever after.", True),
        ("\u2018Off with her head!\u2019 the Queen shouted.", False),
        ('"Whose fault was it?"', False),
        ("(He was a fine fellow.)", False),
        ("1851 was the year.", False),
        ("\u2026 and then it ended.", True),
        ("; or so he thought.", True),
    ],
)
def test_fragment_is_a_line_starting_mid_sentence(line, fragment):
    assert _is_fragment(line) is fragment


def test_short_lines_are_three_words_or_fewer():
    assert _is_short("Genres / Rock / pop")
    assert _is_short("Helium")
    assert not _is_short("The Beatles stopped touring in 1966.")


def test_answer_lines_skip_blank_lines_headings_and_bullets():
    text = "## The Beatles\n\n- They stopped touring in 1966.\n**Moby-Dick**\n2. and then"
    assert _answer_lines(text) == ["They stopped touring in 1966.", "and then"]
    # a fusion separator or source header is layout, not a line a person reads
    assert _answer_lines("[KIWIX — Emu]\nEmus live in Australia. [1]\n\n---\n\nThey cannot fly.") == [
        "Emus live in Australia. [1]",
        "They cannot fly.",
    ]


def test_a_repeated_sentence_is_a_duplicate_across_lines_and_inside_one():
    assert _has_duplicate("Call me Ishmael. Some years ago.\nSome years ago!")
    assert _has_duplicate("The rabbit ran. The  RABBIT ran.")
    assert not _has_duplicate("Call me Ishmael.\nSome years ago, never mind how long.")


def test_quote_span_is_the_quote_in_the_chapter_text():
    text = "Chapter 1.\n\nCall me  Ishmael. Some years ago"
    start, end = _quote_span("call me ishmael", text)
    assert text[start:end] == "Call me  Ishmael"
    assert _quote_span("call me ahab", text) is None


def _book_cite(start, end, chapter="c1", book="b"):
    return Citation("book", book, chapter, "T", "k", start, end)


def test_first_citation_gold_on_sentence_and_chunk_spans():
    item = QAItem("q", "?", "x.txt")
    gold = GoldSpan("b", "c1", 1000, 1400)
    assert _first_citation_gold(item, gold, [_book_cite(1100, 1200)])  # a sentence inside the passage
    assert _first_citation_gold(item, gold, [_book_cite(1350, 1450)])  # half of the sentence inside
    assert not _first_citation_gold(item, gold, [_book_cite(1360, 1460)])  # less than half inside
    assert _first_citation_gold(item, gold, [_book_cite(0, 3000)])  # a chunk holding the whole passage
    assert _first_citation_gold(item, gold, [_book_cite(1200, 4000)])  # a chunk holding half of it
    assert not _first_citation_gold(item, gold, [_book_cite(1250, 4000)])
    assert not _first_citation_gold(item, gold, [_book_cite(1100, 1200, chapter="c2")])
    assert not _first_citation_gold(item, gold, [_book_cite(1100, 1200, book="other")])
    # only the FIRST citation counts
    assert not _first_citation_gold(item, gold, [_book_cite(0, 100), _book_cite(1100, 1200)])
    assert _first_citation_gold(item, gold, []) is False
    assert _first_citation_gold(item, None, [_book_cite(1100, 1200)]) is None  # no gold: not measured
    whole = GoldSpan("b", "c1", 0, 9000, whole_chapter=True)
    assert _first_citation_gold(item, whole, [_book_cite(8000, 8100)])


def test_first_citation_gold_on_kiwix_is_the_gold_article_first():
    item = QAItem("k", "?", "", gold_zim="wiki", gold_path="A/Hoover_Dam")
    gold_cite = Citation("kiwix", zim="wiki", path="A/Hoover_Dam")
    other = Citation("kiwix", zim="wiki", path="A/Colorado_River")
    assert _first_citation_gold(item, None, [gold_cite, other])
    assert not _first_citation_gold(item, None, [other, gold_cite])
    assert not _first_citation_gold(item, None, [])


def test_gold_cited_is_judged_on_the_cited_chunk_for_sentence_citations():
    item = QAItem("q", "Who was the chief mate?", "x.txt", answers=("Starbuck",))
    gold = GoldSpan("b", "c1", 1000, 1400)
    chunk = Hit("b", "c1", "T", "k", 800, 3800, 0.0, "...")
    sentence = _book_cite(2000, 2100)  # in the chunk, outside the gold passage
    answer = Answer("?", "The chief mate was Starbuck. [1]", (sentence,), "BOOK", ("book",), 2)
    check = _check(item, gold, answer, 1.0, lambda c: "The chief mate was Starbuck.", lambda c: chunk)
    assert check.gold_cited and check.first_gold is False
    assert check.in_text and check.words == 5 and not check.refused


def test_strict_metrics_on_a_hand_computed_case():
    def chk(answer, in_text=None, first=None, refused=False, dup=False, lines=1, frag=0, short=0, expect=""):
        return AnswerCheck(
            answer,
            None,
            None,
            refused,
            False,
            1,
            1.0,
            (),
            in_text,
            len(answer.split()),
            first,
            refused,
            dup,
            lines,
            frag,
            short,
            expect,
        )

    records = [
        EvalRecord("1", "?", True, 1, 1.0, (), check=chk("a b c d", True, True, lines=2, frag=1)),
        EvalRecord("2", "?", True, 1, 1.0, (), check=chk("a b", False, False, dup=True, lines=2, short=2)),
        EvalRecord("3", "?", False, None, 0.0, (), check=chk(NOT_FOUND, False, None, refused=True, lines=0)),
        EvalRecord("4", "?", False, None, 0.0, (), check=chk("x y z w v u", None, None)),
    ]
    m = _metrics(records)
    assert m["answer_in_text"] == round(1 / 3, 4)  # the refusal counts as a miss; no answers: left out
    assert m["answer_words_p50"] == 4.0  # over the three non-refusals: 4, 2, 6 words
    assert m["first_citation_gold"] == 0.5
    assert m["duplicate_rate"] == round(1 / 3, 4)
    assert m["fragment_rate"] == 0.2 and m["short_line_rate"] == 0.4  # over 5 lines
    assert "refusal_rate" not in m and "answered_rate" not in m  # no expect: not measured


def test_refusal_and_answered_rates_over_expected_questions():
    def chk(refused, expect):
        return AnswerCheck("t", None, None, refused, False, 1, 1.0, refused=refused, expect=expect)

    records = [
        EvalRecord(str(i), "?", False, None, 0.0, (), kind="library", check=chk(r, e))
        for i, (r, e) in enumerate(
            [(True, "refuse"), (True, "refuse"), (False, "refuse"), (False, "answer"), (True, "answer")]
        )
    ]
    m = _metrics(records)
    assert m["refusal_rate"] == round(2 / 3, 4) and m["answered_rate"] == 0.5


def test_library_questions_are_read_with_what_they_expect(tmp_path):
    path = tmp_path / "lib.jsonl"
    rows = [
        {"question": "Who wrote Dracula?", "expect": "refuse"},
        {"question": "Who was the chief mate?", "expect": "answer", "answers": ["Starbuck"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    off, on = qa_items(str(path))
    assert (off.kind, off.expect, on.kind, on.expect) == ("library", "refuse", "library", "answer")
    assert on.answers == ("Starbuck",)
    path.write_text(json.dumps({"question": "?", "expect": "maybe"}) + "\n")
    with pytest.raises(FolioError, match="expect"):
        qa_items(str(path))


def test_a_question_the_archives_answer_is_expected_answered_only_beside_them(tmp_path):
    path = tmp_path / "lib.jsonl"
    row = {"question": "What is the capital of Australia?", "expect": "refuse"}
    path.write_text(json.dumps({**row, "expect_with_zim": "answer", "answers_with_zim": ["Canberra"]}) + "\n")
    (books_only,) = qa_items(str(path))
    (beside,) = qa_items(str(path), with_zims=True)
    assert (books_only.expect, books_only.answers) == ("refuse", ())
    assert (beside.expect, beside.answers) == ("answer", ("Canberra",))
    path.write_text(json.dumps({**row, "expect_with_zim": "maybe"}) + "\n")
    with pytest.raises(FolioError, match="expect_with_zim"):
        qa_items(str(path))


def test_the_sample_questions_the_zims_answer_say_where_the_answer_lies():
    """Each line expected answered beside the sample ZIMs names the article and quotes it; the ZIMs hold
    the quote (checked against the archives in ``test_the_zim_quotes_of_the_library_questions_are_real``)."""
    rows = [json.loads(line) for line in Path("tests/qa/library_questions.jsonl").read_text().splitlines()]
    beside = [r for r in rows if r.get("expect_with_zim")]
    assert len(beside) == 4 and all(
        r["expect"] == "refuse" and r["expect_with_zim"] == "answer" for r in beside
    )
    assert all(r["zim_source"].count("/A/") == 1 and r["zim_quote"] and r["answers_with_zim"] for r in beside)


def test_the_zim_quotes_of_the_library_questions_are_real(data_dir):
    import html
    import re

    from libzim.reader import Archive

    rows = [json.loads(line) for line in Path("tests/qa/library_questions.jsonl").read_text().splitlines()]
    for row in (r for r in rows if r.get("zim_source")):
        zim, path = row["zim_source"].split("/", 1)
        raw = bytes(Archive(data_dir / "zim" / f"{zim}.zim").get_entry_by_path(path).get_item().content)
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw.decode("utf-8"))).split())
        assert row["zim_quote"] in text, row["id"]
        assert any(a.lower() in row["zim_quote"].lower() for a in row["answers_with_zim"]), row["id"]


def test_the_sample_question_file_has_thirty_of_each_kind():
    items = qa_items("tests/qa/library_questions.jsonl")
    assert sum(i.expect == "refuse" for i in items) >= 30
    assert sum(i.expect == "answer" for i in items) >= 30
    assert len({i.question for i in items}) == len(items)


# --- ask_hit@k: where the reader reads -------------------------------------------------------------


def test_ask_rank_is_the_place_of_the_first_citation_whose_chunk_covers_the_gold():
    item = QAItem("q", "?", "x.txt", answers=("x",))
    gold = GoldSpan("b", "c1", 1000, 1400)
    chunks = {100: _h(0, 600), 200: _h(900, 1500), 300: _h(1000, 1400, chapter="c2")}
    cites = (_book_cite(100, 110), _book_cite(300, 310, chapter="c2"), _book_cite(200, 210))
    answer = Answer("?", "x [1] [2] [3]", cites, "BOOK", ("book",), 1)
    check = _check(item, gold, answer, 1.0, lambda c: "text", lambda c: chunks[c.start])
    assert check.ask_rank == 3 and check.gold_cited  # the chunk behind the third citation holds the gold
    assert (
        _check(
            item, gold, replace(answer, citations=cites[:2]), 1.0, lambda c: "t", lambda c: chunks[c.start]
        ).ask_rank
        is None
    )


def test_ask_hit_at_k_beside_search_hit_and_their_difference():
    def rec(rank, ask_rank, located=True):
        return EvalRecord("q", "?", located, rank, 1.0, (), check=replace(_chk(), ask_rank=ask_rank))

    records = [rec(1, 2), rec(1, 1), rec(2, 1), rec(None, None), rec(None, 1, located=False)]
    m = _metrics(records)
    assert m["hit@1"] == 0.5
    assert m["ask_hit@1"] == 0.5 and m["ask_hit@3"] == 0.75  # over the four located questions
    assert m["ask_vs_search@1"] == 0.0
    m = _metrics([rec(1, 3), rec(1, None)])
    assert m["ask_hit@1"] == 0.0 and m["ask_hit@3"] == 0.5 and m["ask_vs_search@1"] == -1.0
    assert "ask_hit@1" not in _metrics([_rec(1)])  # retrieval only


def test_kiwix_ask_rank_is_the_place_of_the_gold_article():
    item = QAItem("k", "?", "", answers=("x",), gold_zim="wiki", gold_path="A/Emu")
    cites = (Citation("kiwix", zim="wiki", path="A/Bird"), Citation("kiwix", zim="wiki", path="A/Emu"))
    answer = Answer("?", "x [1] [2]", cites, "NOT_BOOK", ("kiwix",), 1)
    assert _check(item, None, answer, 1.0, lambda c: "t", lambda c: None).ask_rank == 2


class _OneChapterStore:
    """A book store of one chapter (what ``BookAligner`` reads)."""

    def __init__(self, text: str) -> None:
        self.book_id = "b"
        self.text = text
        self.descriptor = {"chapters": [{"chapter_id": "c", "title": "All", "length": len(text)}]}

    def chapter_text(self, chapter_id: str) -> str:
        return self.text


def test_a_gold_passage_an_edition_splits_is_located_whole(data_dir):
    # Ginger and Pickles: this edition puts two paragraphs ("The closing of the shop ...") between the
    # FairytaleQA section's first two and the rest; the best-voted offset held only the rest, so the gold
    # span began after "began to sell peppermints and candles", the sentence that answers
    import csv

    from folio.nodes.core.gold import BookAligner

    book = (data_dir / "books/txt/pg572_potter_great-big-treasury.txt").read_text(encoding="utf-8")
    with open(data_dir / "qa/fairytaleqa/sections.csv", encoding="utf-8") as f:
        section = next(
            r["text"]
            for r in csv.DictReader(f)
            if r["story"] == "tale-of-ginger-and-pickles" and "began to sell peppermints" in r["text"]
        )
    found = BookAligner(_OneChapterStore(book)).locate(section)
    assert found is not None
    span = " ".join(book[found[1] : found[2]].split())
    assert span.startswith("After a time Mr. John Dormouse and his daughter began to sell peppermints")
    assert span.endswith("which is not the way to carry on a retail business")
    assert "Ginger and Pickles retired into the back parlour" not in span
