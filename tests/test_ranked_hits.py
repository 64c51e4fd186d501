"""The ask graph's rerank stage (``ranked_hits``): ``none``, a cross-encoder the test builds and saves, and
one bounded LLM call (scripted server); each falls back to the search order with a note."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.dataflows.asking import ask
from folio.nodes.backends.llm import OpenAIChatClient
from folio.nodes.backends.rerank import RerankError, order_messages, reranked, valid_order
from folio.nodes.core.types import BookHits, Hit
from folio.nodes.query.book_flow import (
    ranked_hits__cross_encoder,
    ranked_hits__llm,
    ranked_hits__none,
)
from tests.servers import Reply, ScriptedLLMServer

QUESTION = "What did the White Rabbit take out of its waistcoat-pocket?"
TEXTS = (
    "The Queen of Hearts, she made some tarts, all on a summer day.",
    "The Rabbit actually took a watch out of its waistcoat-pocket, and looked at it.",
    "Alice was beginning to get very tired of sitting by her sister on the bank.",
    "The Cat only grinned when it saw Alice.",
)


def _found(texts: tuple[str, ...] = TEXTS) -> BookHits:
    hits = tuple(
        Hit("b", "c1", "I", f"c1.{i:03d}", i * 10, i * 10 + 9, 1.0 - i / 10, t) for i, t in enumerate(texts)
    )
    return BookHits(QUESTION, hits, hits, (), None, ("search(...)",))


# --- pure: the reply check and the fallback -------------------------------------------------------------


def test_an_llm_order_names_passages_by_number_and_the_rest_keep_their_order() -> None:
    assert valid_order({"order": [3, 1]}, 4) == [2, 0, 1, 3]
    assert valid_order({"order": [2, 2, 1]}, 3) == [1, 0, 2]  # a repeat is dropped


@pytest.mark.parametrize(
    "reply",
    [
        {"order": [5]},
        {"order": [0]},
        {"order": []},
        {"order": ["2"]},
        {"order": [True]},
        {"rank": [1]},
        [1, 2],
    ],
)
def test_an_invalid_llm_order_is_refused(reply: object) -> None:
    with pytest.raises(RerankError):
        valid_order(reply, 4)


def test_the_llm_prompt_numbers_the_passages_and_asks_for_ids_only() -> None:
    system, user = order_messages(QUESTION, TEXTS)
    assert '{"order": [passage numbers]}' in system["content"]
    assert "[2] The Rabbit actually took a watch" in user["content"] and QUESTION in user["content"]


def test_a_stage_that_cannot_run_keeps_the_search_order_with_a_note() -> None:
    def broken(question: str, texts: list[str]) -> list[int]:
        raise RerankError("model", "no such model")

    found = _found()
    kept = reranked(found, broken, 20, "cross-encoder")
    assert kept.hits == found.hits
    assert kept.notes == ("cross-encoder rerank unavailable (model: no such model): search order kept",)


def test_rerank_none_is_the_search_order() -> None:
    found = (_found(),)
    assert ranked_hits__none(found) is found


def test_only_the_first_rerank_depth_hits_are_reordered() -> None:
    reordered = reranked(_found(), lambda q, texts: list(reversed(range(len(texts)))), 2, "test")
    assert [h.text for h in reordered.hits] == [TEXTS[1], TEXTS[0], TEXTS[2], TEXTS[3]]


# --- cross-encoder: a tiny model built and saved here, loaded by the real code --------------------------


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer BERT sequence classifier (one label) and a word-level tokenizer, saved as a model folder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = sorted({w.strip(".,-").lower() for t in (*TEXTS, QUESTION) for w in t.replace("-", " ").split()})
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # spread the scores so that the order is not a float tie
        model.classifier.weight.mul_(50.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _reference_order(path: Path, question: str, texts: tuple[str, ...]) -> list[int]:
    """The order by the saved model's own logits, computed with transformers directly."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        batch = tokenizer([question] * len(texts), list(texts), return_tensors="pt", padding=True)
        logits = model(**batch).logits[:, 0].tolist()
    return sorted(range(len(texts)), key=lambda i: (-logits[i], i))


@pytest.mark.model
def test_the_cross_encoder_orders_the_top_hits_by_its_scores(tiny_cross_encoder: Path) -> None:
    (ranked,) = ranked_hits__cross_encoder((_found(),), rerank_model=str(tiny_cross_encoder), rerank_depth=20)
    expected = [TEXTS[i] for i in _reference_order(tiny_cross_encoder, QUESTION, TEXTS)]
    assert [h.text for h in ranked.hits] == expected and not ranked.notes
    assert expected != list(TEXTS)  # the model changed the order: the test can fail


@pytest.mark.model
def test_a_missing_cross_encoder_keeps_the_search_order_with_a_note(tmp_path: Path) -> None:
    (ranked,) = ranked_hits__cross_encoder(
        (_found(),), rerank_model=str(tmp_path / "no-model"), rerank_depth=20
    )
    assert ranked.hits == _found().hits
    assert len(ranked.notes) == 1 and ranked.notes[0].startswith("cross-encoder rerank unavailable")
    (unset,) = ranked_hits__cross_encoder((_found(),), rerank_model=None)
    assert "needs rerank_model" in unset.notes[0]


def test_ask_with_the_cross_encoder_answers_from_its_first_hits(
    alice_library: Path, tiny_cross_encoder
) -> None:
    answer = ask(
        QUESTION,
        library=alice_library,
        config={"rerank": "cross_encoder", "rerank_model": str(tiny_cross_encoder)},
    )
    assert answer.citations and not any("rerank unavailable" in n for n in answer.notes)
    broken = ask(
        QUESTION, library=alice_library, config={"rerank": "cross_encoder", "rerank_model": "/no/such/model"}
    )
    assert broken.citations and any(n.startswith("cross-encoder rerank unavailable") for n in broken.notes)


# --- LLM: one bounded call (scripted server) -------------------------------------------------------------


def test_the_llm_orders_the_top_hits_in_one_bounded_call() -> None:
    with ScriptedLLMServer([{"order": [2, 4]}]) as server:
        client = OpenAIChatClient(server.url, "m", max_retries=0)
        (ranked,) = ranked_hits__llm((_found(),), client, rerank_depth=20)
        request = server.requests[0]
    assert [h.text for h in ranked.hits] == [TEXTS[1], TEXTS[3], TEXTS[0], TEXTS[2]] and not ranked.notes
    assert len(server.requests) == 1 and request["max_tokens"] <= 96


@pytest.mark.parametrize("reply", [{"order": [9]}, Reply.fail(500), Reply.answer("the second one")])
def test_a_refused_llm_order_keeps_the_search_order_with_a_note(reply: object) -> None:
    with ScriptedLLMServer([reply]) as server:
        client = OpenAIChatClient(server.url, "m", max_retries=0)
        (ranked,) = ranked_hits__llm((_found(),), client, rerank_depth=20)
    assert ranked.hits == _found().hits
    assert len(ranked.notes) == 1 and ranked.notes[0].startswith("LLM rerank unavailable")


def test_ask_with_the_llm_rerank_makes_one_ordering_call_between_route_and_answer(
    alice_library: Path,
) -> None:
    script = [
        {"route": "BOOK", "confidence": 0.9, "suggested_queries": []},
        {"order": [2, 1]},
        Reply.answer("It took a watch out of its waistcoat-pocket [1]."),
    ]
    config = {"llm": "openai", "llm_max_retries": 0, "rerank": "llm", "rerank_depth": 5}
    with ScriptedLLMServer(script) as server:
        answer = ask(QUESTION, library=alice_library, config={**config, "llm_base_url": server.url})
        prompts = [r["messages"][0]["content"] for r in server.requests]
    assert len(prompts) == 3 and prompts[1].startswith("Order the numbered passages")
    assert answer.citations and not any("rerank unavailable" in n for n in answer.notes)


def test_rerank_llm_without_an_llm_is_refused_in_one_line(alice_library: Path) -> None:
    from folio.nodes.core.types import FolioError

    with pytest.raises(FolioError, match="rerank: llm needs an LLM"):
        ask(QUESTION, library=alice_library, config={"rerank": "llm"})
