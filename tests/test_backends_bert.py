"""The plain-torch BERT encoder: which models it takes, vectors equal to sentence-transformers' on real
book paragraphs (fp32 and bf16), the sentence-transformers path for every other model, and a hybrid
search that imports neither transformers nor sentence-transformers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from folio.nodes.backends.bert import packed_rows, plain_bert_model, plain_bert_settings
from folio.nodes.backends.encoder import _float32_tokens, _load_encoder, resolve_model_dir
from tests.test_cli import _imported_heavy

ALICE_TXT = "books/txt/pg11_carroll_alices-adventures-in-wonderland.txt"


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    return resolve_model_dir("minilm")


def _model_copy(source: Path, target: Path, pooling: dict | None = None, config: dict | None = None) -> Path:
    """``source`` copied into ``target`` (weights linked), with its pooling or BERT config changed."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors"))
    (target / "model.safetensors").symlink_to(source / "model.safetensors")
    if pooling is not None:  # every mode off but the given one
        base = json.loads((source / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        modes = {k: (False if k.startswith("pooling_mode") else v) for k, v in base.items()}
        (target / "1_Pooling" / "config.json").write_text(json.dumps({**modes, **pooling}), encoding="utf-8")
    if config is not None:
        base = json.loads((source / "config.json").read_text(encoding="utf-8"))
        (target / "config.json").write_text(json.dumps({**base, **config}), encoding="utf-8")
    return target


def _paragraphs(data_dir: Path) -> list[str]:
    text = (data_dir / ALICE_TXT).read_text(encoding="utf-8")
    paragraphs = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40][:120]
    return paragraphs + [" ".join(paragraphs[i : i + 8]) for i in range(0, 40, 8)]  # some past 256 tokens


def test_minilm_is_a_plain_bert_pipeline_with_mean_pooling_and_its_own_window(minilm_dir):
    assert plain_bert_settings(minilm_dir) == {
        "hidden": 384,
        "heads": 12,
        "layers": 6,
        "eps": 1e-12,
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": 256,
    }


def test_cls_pooling_is_taken_and_other_pooling_or_architectures_are_left_to_sentence_transformers(
    minilm_dir, tmp_path
):
    cls = _model_copy(minilm_dir, tmp_path / "cls", pooling={"pooling_mode_cls_token": True})
    assert plain_bert_settings(cls)["pooling"] == "cls"  # type: ignore[index]
    max_pool = _model_copy(minilm_dir, tmp_path / "max", pooling={"pooling_mode_max_tokens": True})
    roberta = _model_copy(minilm_dir, tmp_path / "roberta", config={"model_type": "roberta"})
    relative = _model_copy(minilm_dir, tmp_path / "rel", config={"position_embedding_type": "relative_key"})
    assert plain_bert_settings(max_pool) is None
    assert plain_bert_settings(roberta) is None
    assert plain_bert_settings(relative) is None
    assert plain_bert_settings(tmp_path) is None  # no modules.json at all


def test_plain_vectors_equal_sentence_transformers_on_real_paragraphs_in_fp32_and_bf16(minilm_dir, data_dir):
    import torch
    from sentence_transformers import SentenceTransformer

    paragraphs = _paragraphs(data_dir)
    reference = SentenceTransformer(str(minilm_dir), device="cpu", local_files_only=True).eval()
    plain = plain_bert_model(minilm_dir)
    assert plain is not None
    expected = reference.encode(paragraphs, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    got = plain.encode(paragraphs, 32)
    assert got.shape == expected.shape == (len(paragraphs), 384)
    assert float(np.abs(got - expected).max()) < 1e-5
    # bf16 on every tenth of them and every long one: without native bfloat16 (this machine's CPU) it is
    # emulated: the full set made the test take 53 s, a quarter 27 s
    some = paragraphs[:-5:10] + paragraphs[-5:]
    reference[0].to(torch.bfloat16)
    reference[0].register_forward_hook(_float32_tokens)
    plain.to_bfloat16()
    expected16 = reference.encode(some, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    agreement = (plain.encode(some, 32) * expected16).sum(axis=1)
    assert float(agreement.min()) > 0.9995 and float(agreement.mean()) > 0.99995


def test_short_texts_share_a_row_and_long_ones_keep_their_own():
    assert packed_rows([], 256) == []
    assert packed_rows([40, 60, 90, 20], 256) == [[2, 1, 0, 3]]  # the reader's four units: one row of 210
    assert packed_rows([256, 200, 60, 56, 10], 256) == [[0], [1, 3], [2, 4]]  # first fit, longest first
    assert packed_rows([300, 5], 256) == [[0], [1]]  # over the capacity: a row of its own
    assert packed_rows([100, 100, 100, 100], 256) == [[0], [1], [2], [3]]  # sharing would save nothing
    assert sorted(i for row in packed_rows([7, 3, 250, 9, 120, 130], 256) for i in row) == list(range(6))


def test_texts_encoded_together_get_the_vectors_they_get_alone(minilm_dir, data_dir):
    """The reader's sentence units of different lengths, packed into one row, each attending only to its
    own tokens at its own positions: the vectors of each text encoded alone (no padding at all)."""
    plain = plain_bert_model(minilm_dir)
    assert plain is not None
    sentences = [s.strip() for s in _paragraphs(data_dir)[10:40] if s.strip()]
    units = [sentences[0][:40], sentences[1], " ".join(sentences[2:4]), sentences[4][:15], sentences[5]]
    together = plain.encode(units, 32)
    alone = np.concatenate([plain.encode([u], 32) for u in units])
    assert float(np.abs(together - alone).max()) < 1e-5
    assert len(packed_rows([len(plain.tokenizer.encode(u).ids) for u in units], 256)) < len(units)


def test_a_model_that_is_not_plain_bert_loads_through_sentence_transformers(minilm_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    other = _model_copy(minilm_dir, tmp_path / "max", pooling={"pooling_mode_max_tokens": True})
    encoder = _load_encoder(str(other), "fp32")
    assert isinstance(encoder.model, SentenceTransformer)
    assert encoder.dimension == 384 and encoder.max_seq_length == 256
    vectors = encoder.encode(["The White Rabbit took a watch out of its waistcoat-pocket."])
    assert vectors.shape == (1, 384) and abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5


def test_hybrid_search_loads_the_model_without_transformers_or_sentence_transformers(alice_library):
    rc, heavy = _imported_heavy(["search", "the White Rabbit's watch", "--library", str(alice_library)])
    assert rc == 0
    assert "torch" in heavy  # the query vector really was computed
    assert "transformers" not in heavy and "sentence_transformers" not in heavy
