"""The encoder's precision: ``auto`` picks bfloat16 only where the CPU computes it natively, bf16 vectors
agree with fp32 on real book text, and a switch of precision never mixes cached vectors."""

from pathlib import Path

import numpy as np
import pytest

from folio.dataflows.caching import _hash_encoder
from folio.nodes.backends import encoder as encoder_module
from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.encoder import load_encoder, resolved_precision
from folio.nodes.embedding import window_vectors
from folio.nodes.types import FolioError, Window
from tests.test_embedding import _Recorder

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
    texts = _paragraphs(data_dir, 64)
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
