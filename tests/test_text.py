import pytest

from folio.nodes.text import content_words, fts_match_expression, sentences, words


def test_words_fold_case_accents_and_apostrophes():
    assert words("Café — Ahab’s WHALE!") == ["cafe", "ahab's", "whale"]


def test_content_words_drop_stop_words_and_possessives():
    assert content_words("What is Ahab's leg made of?") == ["ahab", "leg", "made"]


def test_content_words_keep_all_words_when_only_stop_words():
    assert content_words("what is it") == ["what", "is", "it"]


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


def test_sentences_give_trimmed_spans():
    text = "Call me Ishmael.  Some years ago — never mind how long! Whale?"
    spans = sentences(text)
    assert [text[s:e] for s, e in spans] == [
        "Call me Ishmael.",
        "Some years ago — never mind how long!",
        "Whale?",
    ]
