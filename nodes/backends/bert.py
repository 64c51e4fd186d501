"""A BERT sentence encoder in plain torch: the sentence-transformers pipeline without importing it.

Importing sentence-transformers costs about 3 s of a cold ``folio search`` or ``folio ask`` on this
machine (it imports transformers, scikit-learn and more); torch itself costs under 1 s. For the models
Folio ships and suggests (all-MiniLM-L6-v2, BAAI/bge-small-en-v1.5), the pipeline is small: the fast
tokenizer from ``tokenizer.json`` (truncated to the model's ``max_seq_length``, padded to the batch's
longest text), a BERT encoder (absolute positions, GELU, post-layer-norm), mean or CLS pooling over the
attention mask, L2 normalisation. ``plain_bert_model`` runs exactly that with the model's own
``model.safetensors`` weights, in float32 or with bfloat16 weights (token states back to float32 before
pooling, as the sentence-transformers path does), and gives the same vectors as sentence-transformers
up to float rounding (tested on real book paragraphs).

``plain_bert_model`` returns None for anything else (another architecture, relative positions, another
activation, a dense or max-pooling module, no safetensors file): those models load through
sentence-transformers as before.

Limitations: CPU inference only; no training, no dropout; only what ``Encoder.encode`` calls
(``encode(texts, batch_size)``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SUPPORTED_MODULES = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def plain_bert_settings(model_dir: Path) -> dict[str, Any] | None:
    """The BERT hyper-parameters, pooling and window of ``model_dir`` when its sentence-transformers
    pipeline is Transformer (a plain BERT) + mean or CLS Pooling (+ Normalize), else None."""
    modules_file = model_dir / "modules.json"
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(modules, list) or not modules:
        return None
    types = [m.get("type") for m in modules if isinstance(m, dict)]
    if len(types) != len(modules) or any(t not in SUPPORTED_MODULES for t in types):
        return None
    if types[0] != SUPPORTED_MODULES[0] or types.count(SUPPORTED_MODULES[1]) != 1:
        return None
    config = _json(model_dir / "config.json")
    if (
        config.get("model_type") != "bert"
        or config.get("hidden_act", "gelu") != "gelu"
        or config.get("position_embedding_type", "absolute") != "absolute"
        or not (model_dir / "model.safetensors").is_file()
    ):
        return None
    pooling_path = next(m.get("path", "") for m in modules if m.get("type") == SUPPORTED_MODULES[1])
    pooling = _json(model_dir / pooling_path / "config.json")
    flags = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if flags == {"pooling_mode_cls_token"}:
        mode = "cls"
    elif flags == {"pooling_mode_mean_tokens"}:
        mode = "mean"
    else:
        return None
    window = _json(model_dir / "sentence_bert_config.json").get("max_seq_length")
    max_positions = int(config.get("max_position_embeddings", 512))
    return {
        "hidden": int(config["hidden_size"]),
        "heads": int(config["num_attention_heads"]),
        "layers": int(config["num_hidden_layers"]),
        "eps": float(config.get("layer_norm_eps", 1e-12)),
        "pooling": mode,
        "normalize": SUPPORTED_MODULES[2] in types,
        "max_seq_length": min(int(window or max_positions), max_positions),
    }


def _bert_module(state: dict[str, Any], settings: dict[str, Any]) -> Any:
    """The BERT encoder as a torch module holding ``state`` (the safetensors weights)."""
    import torch
    from torch import nn
    from torch.nn import functional

    hidden, heads, eps = settings["hidden"], settings["heads"], settings["eps"]

    def linear(prefix: str) -> nn.Linear:
        weight = state[f"{prefix}.weight"]
        layer = nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight = nn.Parameter(weight, requires_grad=False)
        layer.bias = nn.Parameter(state[f"{prefix}.bias"], requires_grad=False)
        return layer

    def norm(prefix: str) -> nn.LayerNorm:
        layer = nn.LayerNorm(hidden, eps=eps)
        layer.weight = nn.Parameter(state[f"{prefix}.weight"], requires_grad=False)
        layer.bias = nn.Parameter(state[f"{prefix}.bias"], requires_grad=False)
        return layer

    class Layer(nn.Module):
        def __init__(self, prefix: str) -> None:
            super().__init__()
            self.query = linear(f"{prefix}.attention.self.query")
            self.key = linear(f"{prefix}.attention.self.key")
            self.value = linear(f"{prefix}.attention.self.value")
            self.attention_out = linear(f"{prefix}.attention.output.dense")
            self.attention_norm = norm(f"{prefix}.attention.output.LayerNorm")
            self.intermediate = linear(f"{prefix}.intermediate.dense")
            self.out = linear(f"{prefix}.output.dense")
            self.out_norm = norm(f"{prefix}.output.LayerNorm")

        def forward(self, x: Any, mask: Any) -> Any:
            batch, tokens, _ = x.shape

            def split(t: Any) -> Any:
                return t.view(batch, tokens, heads, hidden // heads).transpose(1, 2)

            context = functional.scaled_dot_product_attention(
                split(self.query(x)), split(self.key(x)), split(self.value(x)), attn_mask=mask
            )
            context = context.transpose(1, 2).reshape(batch, tokens, hidden)
            x = self.attention_norm(self.attention_out(context) + x)
            return self.out_norm(self.out(functional.gelu(self.intermediate(x))) + x)

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding.from_pretrained(state["embeddings.word_embeddings.weight"])
            self.positions = nn.Embedding.from_pretrained(state["embeddings.position_embeddings.weight"])
            self.types = nn.Embedding.from_pretrained(state["embeddings.token_type_embeddings.weight"])
            self.norm = norm("embeddings.LayerNorm")
            self.layers = nn.ModuleList(Layer(f"encoder.layer.{i}") for i in range(settings["layers"]))

        def forward(self, ids: Any, mask: Any) -> Any:
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.norm(self.words(ids) + self.types(torch.zeros_like(ids)) + self.positions(positions))
            additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            for layer in self.layers:
                x = layer(x, additive)
            return x

    return Bert().eval()


class PlainBertModel:
    """``encode(texts, batch_size)`` like ``SentenceTransformer.encode`` for a plain BERT pipeline."""

    def __init__(self, model_dir: Path, settings: dict[str, Any], tokenizer: Any) -> None:
        from safetensors.torch import load_file

        state = {
            k.removeprefix("bert."): v.float()
            for k, v in load_file(str(model_dir / "model.safetensors")).items()
        }
        self.module = _bert_module(state, settings)
        self.settings = settings
        self.max_seq_length = settings["max_seq_length"]
        self.tokenizer = tokenizer
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.enable_padding()

    def to_bfloat16(self) -> None:
        """bfloat16 weights and activations inside the encoder; pooling stays float32."""
        import torch

        self.module.to(torch.bfloat16)

    def encode(self, texts: Sequence[str], batch_size: int = 32, **_: Any) -> np.ndarray:
        import torch

        out = []
        for lo in range(0, len(texts), batch_size):
            batch = self.tokenizer.encode_batch(list(texts[lo : lo + batch_size]))
            ids = torch.tensor([e.ids for e in batch], dtype=torch.long)
            mask = torch.tensor([e.attention_mask for e in batch], dtype=torch.long)
            with torch.inference_mode():
                states = self.module(ids, mask).float()
            if self.settings["pooling"] == "cls":
                vectors = states[:, 0]
            else:
                weights = mask.unsqueeze(-1).float()
                vectors = (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            if self.settings["normalize"]:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            out.append(vectors.numpy())
        return np.concatenate(out).astype(np.float32, copy=False) if out else np.zeros((0, 0), np.float32)


def plain_bert_model(model_dir: Path) -> PlainBertModel | None:
    """The plain-torch model of ``model_dir`` when its pipeline is a plain BERT one, else None."""
    settings = plain_bert_settings(model_dir)
    if settings is None:
        return None
    from tokenizers import Tokenizer

    return PlainBertModel(model_dir, settings, Tokenizer.from_file(str(model_dir / "tokenizer.json")))
