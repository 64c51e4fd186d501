"""ONNX Runtime int8 sentence encoder: the same model, tokenizer, windows and pooling as the torch one.

At first use the model's transformer is exported to ONNX with torch and dynamically quantised to int8
weights, per output channel; the result is stored
under ``model_cache_dir`` (the library's ``cache/models``) in a folder named by the model and
``EXPORT_SETTINGS``, so a later process loads it without importing torch. Pooling (mean or CLS, as the
model's ``1_Pooling/config.json`` says) and L2 normalisation run in numpy. Encoder windows are cut by
the caller exactly as for torch (``Encoder.window_tokens``); texts longer than ``max_seq_length`` tokens
are truncated like sentence-transformers does, which callers never rely on.

The model id carries ``+onnx-int8-<settings hash>``: the per-window embedding cache and the node cache
key on it, so switching the embedder never mixes torch and ONNX vectors.

Limitations: CPU only; the export needs torch and transformers (installed with Folio) and the
``onnx`` extra (``pip install 'folio[onnx]'``: onnxruntime, onnx).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.backends.encoder import ALIASES, Encoder, query_prefix_for, resolve_model_dir
from folio.nodes.core.types import FolioError

# What the stored model is made with; any change names a new folder (and a new model id). Measured on
# Alice windows (CPU time vs torch fp32, mean cosine): per-tensor int8 1.58x at 0.954; per-channel 1.60x at
# 0.993; ONNX Runtime's BERT fusion before quantising 1.49x at 0.993 (slower here), so no fusion.
EXPORT_SETTINGS: dict[str, Any] = {
    "opset": 17,
    "weights": "QInt8",
    "per_channel": True,
    "reduce_range": False,
}
INSTALL = "pip install 'folio[onnx]' (onnxruntime, onnx)"
MODEL_FILE = "model.int8.onnx"


def _require_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise FolioError("embedder: onnx", f"onnxruntime is missing: {INSTALL}") from None
    return onnxruntime


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def export_key(model_name: str) -> str:
    """The cache folder name of ``model_name`` exported with ``EXPORT_SETTINGS``."""
    digest = hashlib.sha1(json.dumps(EXPORT_SETTINGS, sort_keys=True).encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name)
    return f"{safe}-onnx-int8-{digest}"


def pooling_mode(model_dir: Path) -> str:
    """``mean`` or ``cls``, from the sentence-transformers pooling config (mean when there is none)."""
    config = model_dir / "1_Pooling" / "config.json"
    if not config.is_file():
        return "mean"
    modes = json.loads(config.read_text(encoding="utf-8"))
    if modes.get("pooling_mode_cls_token"):
        return "cls"
    if modes.get("pooling_mode_mean_tokens", True):
        return "mean"
    raise FolioError(str(config), "only mean or CLS pooling can run on ONNX Runtime")


def max_seq_length(model_dir: Path) -> int:
    """The sentence-transformers window of the model (``sentence_bert_config.json``; 512 without one)."""
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text(encoding="utf-8")).get("max_seq_length", 512))
    return 512


def pooled(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """L2-normalised sentence vectors from token states ``(batch, tokens, dim)`` and the attention mask."""
    if mode == "cls":
        vectors = hidden[:, 0, :].astype(np.float32)
    else:
        weights = mask[:, :, None].astype(np.float32)
        vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def _export_fp32(model_dir: Path, target: Path) -> None:
    """The transformer of ``model_dir`` as an fp32 ONNX graph (needs torch and transformers)."""
    import torch
    from transformers import AutoModel

    from folio.nodes.backends.encoder import quiet_transformers

    quiet_transformers()
    bert = AutoModel.from_pretrained(str(model_dir)).eval()

    class _Hidden(torch.nn.Module):  # keyword arguments: forward()'s positional order varies by version
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    sample = torch.ones((1, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(),
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes},
            opset_version=int(EXPORT_SETTINGS["opset"]),
            dynamo=False,
        )


def export_int8(model_dir: Path, target: Path) -> Path:
    """Export and quantise the model into ``target/MODEL_FILE`` (atomically); returns that path."""
    _require_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        _export_fp32(model_dir, work / "model.fp32.onnx")
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # not its "consider pre-processing" advice on stderr
        try:
            quantize_dynamic(
                str(work / "model.fp32.onnx"),
                str(work / MODEL_FILE),
                weight_type=getattr(QuantType, str(EXPORT_SETTINGS["weights"])),
                per_channel=bool(EXPORT_SETTINGS["per_channel"]),
                reduce_range=bool(EXPORT_SETTINGS["reduce_range"]),
            )
        finally:
            root.setLevel(level)
        (work / "model.fp32.onnx").unlink(missing_ok=True)
        (work / "settings.json").write_text(json.dumps(EXPORT_SETTINGS, sort_keys=True), encoding="utf-8")
        try:
            work.rename(target)
        except OSError:  # another process stored it first: keep theirs
            if not (target / MODEL_FILE).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / MODEL_FILE


class OnnxSentenceModel:
    """An ONNX Runtime session with the ``encode`` call of a sentence-transformers model (what
    ``Encoder.encode`` uses): tokenise with padding to the batch's longest text, run, pool, normalise."""

    def __init__(
        self,
        model_file: Path,
        tokenizer: Any,
        max_seq: int,
        pooling: str,
        threads: int,
        spinning: bool = False,
    ) -> None:
        ort = _require_onnxruntime()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        if (
            not spinning
        ):  # idle threads sleep instead of spinning: on a shared machine spinning costs wall time
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise FolioError(str(model_file), f"cannot load the ONNX model: {_first_line(exc)}") from None
        self.tokenizer = tokenizer
        self.tokenizer.enable_truncation(max_seq)
        self.tokenizer.enable_padding()
        self.max_seq_length = max_seq
        self.pooling = pooling
        self.input_names = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: Sequence[str], batch_size: int = 32, **_: Any) -> np.ndarray:
        out = []
        for lo in range(0, len(texts), batch_size):
            batch = self.tokenizer.encode_batch(list(texts[lo : lo + batch_size]))
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self.input_names})[0]
            out.append(pooled(hidden, mask, self.pooling))
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)


@functools.lru_cache(maxsize=4)
def load_onnx_encoder(embedding_model: str, model_cache_dir: str | None, threads: int = 0) -> Encoder:
    """The int8 ONNX encoder of ``embedding_model`` (exported on first use into ``model_cache_dir``; a
    temporary folder, removed at exit, when None). Loaded once per process."""
    _require_onnxruntime()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    from folio.nodes.backends.workers import available_cores

    model_dir = resolve_model_dir(embedding_model)
    name = ALIASES.get(embedding_model.lower(), embedding_model)
    base = Path(model_cache_dir) if model_cache_dir else Path(tempfile.mkdtemp(prefix="folio-onnx-"))
    if not model_cache_dir:
        import atexit

        atexit.register(shutil.rmtree, base, True)
    stored = base / export_key(name)
    model_file = stored / MODEL_FILE
    if not model_file.is_file():
        try:
            export_int8(model_dir, stored)
        except FolioError:
            raise
        except Exception as exc:
            raise FolioError(str(model_dir), f"cannot export the model to ONNX: {_first_line(exc)}") from None
    try:
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        batch_tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except Exception as exc:
        raise FolioError(str(model_dir), f"cannot load the tokenizer: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    max_seq = max_seq_length(model_dir)
    model = OnnxSentenceModel(
        model_file, batch_tokenizer, max_seq, pooling_mode(model_dir), threads or available_cores()
    )
    probe = model.encode(["dimension probe"])
    return Encoder(
        model_id=f"{name}@{max_seq}+{export_key(name).rsplit('-', 1)[-1]}-onnx-int8",
        model_dir=model_dir,
        model=model,
        tokenizer=tokenizer,
        max_seq_length=max_seq,
        dimension=int(probe.shape[1]),
        query_prefix=query_prefix_for(model_dir),
    )
