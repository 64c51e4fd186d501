"""The encoder: its precision (``auto`` picks bfloat16 only where the CPU computes it natively, bf16
vectors agree with fp32 on real book text, a switch of precision never mixes cached vectors) and the
query-side encode memo (``remembered_encode``: what it reuses, what it encodes, what it forgets), and its
windows (chunks and long queries are cut alike; no query is silently truncated)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.caching import _hash_encoder
from folio.nodes.backends import encoder as encoder_module
from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.encoder import (
    load_encoder,
    remembered_encode,
    remembered_query,
    resolved_precision,
    text_windows,
    unit_means,
    window_ranges,
)
from folio.nodes.core.types import FolioError, Window
from folio.nodes.ingest.embedding import window_vectors
from tests.test_embedding import _Recorder


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


@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", 1e-6), ("bf16", 2e-3)])
def test_remembered_vectors_of_book_sentences_match_a_fresh_encode(encoder, data_dir, precision, tolerance):
    """A vector encoded in another batch differs only by that batch's padding: ~1e-7 in fp32, ~1e-4 in
    bf16 (its matrix kernels block by batch shape), far below a score difference that orders sentences."""
    model = load_encoder("minilm", precision)
    text = (data_dir / "books/txt/pg572_potter_great-big-treasury.txt").read_text(encoding="utf-8")
    sentences = [" ".join(s.split()) for s in text[20_000:24_000].split(".") if len(s.split()) > 3][:8]
    remembered_encode(model, sentences[:3])  # encoded in another batch, with other padding
    out = remembered_encode(model, sentences)
    assert np.allclose(out, model.encode(sentences), atol=tolerance)
    assert np.allclose(
        remembered_query(model, sentences[0]), model.encode_query(sentences[0]), atol=tolerance
    )


ALICE = "books/txt/pg11_carroll_alices-adventures-in-wonderland.txt"


def _paragraphs(data_dir: Path, n: int) -> list[str]:
    text = (data_dir / ALICE).read_text(encoding="utf-8")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if len(p.split()) >= 12]
    return paragraphs[40 : 40 + n]


@pytest.mark.parametrize(("native", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_precision_is_bf16_exactly_where_the_cpu_computes_it_natively(monkeypatch, native, expected):
    monkeypatch.setattr(encoder_module, "native_bf16", lambda: native)
    assert resolved_precision("auto") == expected
    assert resolved_precision("fp32") == "fp32"
    assert resolved_precision("bf16") == "bf16"


def test_an_unknown_precision_is_a_one_line_error_naming_the_setting_and_the_choices():
    with pytest.raises(FolioError) as info:
        resolved_precision("int4")
    message = str(info.value)
    assert "encoder_precision" in message and "auto, fp32, bf16" in message and "\n" not in message


def test_bf16_vectors_agree_with_fp32_on_real_book_paragraphs(encoder, data_dir):
    texts = _paragraphs(data_dir, 32)  # 32: bfloat16 is emulated here (64 took 22 s)
    fp32 = load_encoder("minilm", "fp32").encode(texts)
    bf16 = load_encoder("minilm", "bf16").encode(texts)
    assert bf16.dtype == np.float32
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cosines = (fp32 * bf16).sum(axis=1)
    assert cosines.min() >= 0.999, cosines.min()
    # the same nearest paragraph for every paragraph's first half, in both precisions
    queries = [" ".join(t.split()[: len(t.split()) // 2]) for t in texts]
    q32 = load_encoder("minilm", "fp32").encode(queries)
    q16 = load_encoder("minilm", "bf16").encode(queries)
    assert ((q32 @ fp32.T).argmax(axis=1) == (q16 @ bf16.T).argmax(axis=1)).all()


def test_switching_precision_never_mixes_cached_vectors(encoder, data_dir, tmp_path):
    fp32, bf16 = load_encoder("minilm", "fp32"), load_encoder("minilm", "bf16")
    assert fp32.model_id == bf16.model_id  # one vector space: the library accepts either
    assert fp32.embedder_id != bf16.embedder_id
    assert _hash_encoder(fp32) != _hash_encoder(bf16)  # the node cache keys differ too
    texts = _paragraphs(data_dir, 6)
    windows = tuple(Window(i, f"c{i}", 0, len(t), t) for i, t in enumerate(texts))
    cache = EmbeddingCache(tmp_path / "emb")
    first = window_vectors(windows, fp32, cache, _Recorder())
    assert cache.get_many(bf16.embedder_id, texts, bf16.dimension) == [None] * len(texts)
    second = window_vectors(windows, bf16, cache, _Recorder())
    assert not np.array_equal(first, second)  # encoded afresh in bf16, not read from fp32's entries
    assert np.array_equal(window_vectors(windows, bf16, cache, _Recorder()), second)


def test_windows_cover_every_token_and_share_the_overlap():
    spans = window_ranges(600, 248, 32)
    assert spans[0] == (0, 248) and spans[-1][1] == 600
    assert all(spans[i + 1][0] == spans[i][1] - 32 for i in range(len(spans) - 1))
    assert window_ranges(0, 10, 2) == [] and window_ranges(7, 10, 2) == [(0, 7)]


def test_a_text_that_fits_one_window_is_kept_whole():
    text = "one two three"
    assert text_windows(text, [(0, 3), (4, 7), (8, 13)], 8) == [text]


def test_a_long_text_is_cut_into_windows_that_reach_its_end():
    words = [f"w{i}" for i in range(50)]
    text = " ".join(words)
    offsets, at = [], 0
    for w in words:
        offsets.append((at, at + len(w)))
        at += len(w) + 1
    parts = text_windows(text, offsets, 20)
    assert len(parts) > 1 and parts[0].startswith("w0 ") and parts[-1].endswith("w49")
    assert all(len(p.split()) <= 20 for p in parts)


def test_a_long_query_is_the_mean_of_its_windows_not_its_first_window(encoder):
    sentence = "The Queen of Hearts shouted for the Knave's head while the jury wrote on their slates. "
    tail = "Far away a ship with white sails crossed the cold northern sea towards the whaling grounds. "
    query = sentence * 18 + tail * 8
    assert encoder.count_tokens(query) > encoder.window_tokens
    parts = text_windows(query, encoder.token_offsets(query), encoder.window_tokens)
    vector = encoder.encode_query(query)
    expected = unit_means(encoder.encode(parts), np.zeros(len(parts), dtype=np.int64), 1)[0]
    assert np.allclose(vector, expected, atol=1e-5)
    first_window_only = encoder.encode([parts[0]])[0]
    assert float(vector @ first_window_only) < 0.99  # the tail counts: no silent truncation


def test_the_encoder_knows_real_words_and_not_slips() -> None:
    # what the slip reading asks before it respells a word (``book_flow._slips_read``)
    encoder = load_encoder("minilm", "fp32")
    for word in ("scare", "build", "describe", "Forgive", "recognise"):
        assert encoder.keeps_whole(word), word
    for word in ("parsely", "hosue", "behaed", "puppiess", "dumplying"):
        assert not encoder.keeps_whole(word), word
