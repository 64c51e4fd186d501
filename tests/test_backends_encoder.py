"""The query-side encode memo (``remembered_encode``): what it reuses, what it encodes, what it forgets."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from folio.nodes.backends import encoder as encoder_module
from folio.nodes.backends.encoder import remembered_encode, remembered_query


class CountingEncoder:
    """A stand-in encoder: a vector per text from its length and first letter; records every batch."""

    query_prefix = "query: "
    dimension = 3

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[len(t), ord(t[0]), 1.0] for t in texts], dtype=np.float32)


@pytest.fixture(autouse=True)
def _forget() -> None:
    encoder_module._REMEMBERED.clear()


def test_a_text_seen_before_is_not_encoded_again_and_gets_the_same_vector() -> None:
    enc = CountingEncoder("m1")
    first = remembered_encode(enc, ["a question", "the first sentence"])
    again = remembered_encode(enc, ["the first sentence", "a new sentence", "a question"])
    assert enc.batches == [["a question", "the first sentence"], ["a new sentence"]]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
    assert np.array_equal(again, enc.encode(["the first sentence", "a new sentence", "a question"]))


def test_a_text_repeated_in_one_call_is_encoded_once() -> None:
    enc = CountingEncoder("m1")
    out = remembered_encode(enc, ["same", "same", "other"])
    assert enc.batches == [["same", "other"]]
    assert out.shape == (3, 3) and np.array_equal(out[0], out[1])


def test_the_least_recently_used_text_is_forgotten_beyond_the_limit() -> None:
    enc = CountingEncoder("m1")
    remembered_encode(enc, ["one", "two"], limit=2)
    remembered_encode(enc, ["one"], limit=2)  # "one" is now the most recent
    remembered_encode(enc, ["three"], limit=2)  # "two" goes
    remembered_encode(enc, ["one", "two"], limit=2)
    assert enc.batches[-1] == ["two"]
    assert len(encoder_module._REMEMBERED["m1"]) == 2


def test_models_never_share_vectors() -> None:
    a, b = CountingEncoder("model-a"), CountingEncoder("model-b")
    remembered_encode(a, ["text"])
    remembered_encode(b, ["text"])
    assert a.batches == [["text"]] and b.batches == [["text"]]


def test_a_caller_cannot_change_a_remembered_vector() -> None:
    enc = CountingEncoder("m1")
    out = remembered_encode(enc, ["text"])
    out[0, 0] = -1.0
    assert remembered_encode(enc, ["text"])[0, 0] == len("text")


def test_a_query_is_remembered_with_its_prefix() -> None:
    enc = CountingEncoder("m1")
    remembered_query(enc, "who?")
    remembered_query(enc, "who?")
    assert enc.batches == [["query: who?"]]


def test_an_encoder_without_a_model_id_is_called_every_time() -> None:
    class Plain:
        calls = 0

        def encode(self, texts: Sequence[str]) -> np.ndarray:
            Plain.calls += 1
            return np.ones((len(texts), 2), dtype=np.float32)

        def encode_query(self, text: str) -> np.ndarray:
            Plain.calls += 1
            return np.ones(2, dtype=np.float32)

    plain = Plain()
    remembered_encode(plain, ["x"])
    remembered_encode(plain, ["x"])
    remembered_query(plain, "q")
    assert Plain.calls == 3 and encoder_module._REMEMBERED == {}


def test_remembered_vectors_of_book_sentences_match_a_fresh_encode(encoder, data_dir) -> None:
    text = (data_dir / "books/txt/pg572_potter_great-big-treasury.txt").read_text(encoding="utf-8")
    sentences = [" ".join(s.split()) for s in text[20_000:24_000].split(".") if len(s.split()) > 3][:8]
    remembered_encode(encoder, sentences[:3])  # encoded in another batch, with other padding
    out = remembered_encode(encoder, sentences)
    assert np.allclose(out, encoder.encode(sentences), atol=1e-6)
    assert np.allclose(remembered_query(encoder, sentences[0]), encoder.encode_query(sentences[0]), atol=1e-6)
