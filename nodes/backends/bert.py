"""A BERT sentence encoder in plain torch: the sentence-transformers pipeline without importing it.

Importing sentence-transformers costs about 3 s of a cold ``folio search`` or ``folio ask`` on this
machine (it imports transformers, scikit-learn and more); torch itself costs under 1 s. For the models
Folio ships and suggests (all-MiniLM-L6-v2, BAAI/bge-small-en-v1.5), the pipeline is small: the fast
tokenizer from ``tokenizer.json`` (truncated to the model's ``max_seq_length``), a BERT encoder
(absolute positions, GELU, post-layer-norm), mean or CLS pooling over the attention mask, L2
normalisation. ``plain_bert_model`` runs exactly that with the model's own ``model.safetensors``
weights, in float32 or with bfloat16 weights (token states back to float32 before pooling, as the
sentence-transformers path does), and gives the same vectors as sentence-transformers
up to float rounding (tested on real book paragraphs).

Short texts are packed, not padded (``packed_rows``): the texts of a batch share rows of at most
``max_seq_length`` tokens, each text at its own positions (from 0) and attending only to its own tokens,
so its vector is the one it gets alone. The reader's four sentence units per question (about 43 tokens
each) were 29% padding as one padded batch; packed, their encode takes 42 ms instead of 50 (p50 of
100 reader-sized batches, 2 threads, an AMD EPYC without bfloat16, 2026-12-07), and an ingest's full
windows are unchanged (96 windows: 4.6 s, 5.0 s before). The query, key and value projections are one
matrix product (``stacked``).

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

    def stacked(prefixes: list[str]) -> nn.Linear:
        """One linear layer for several that read the same input (query, key and value): one matrix
        product instead of three, the same numbers side by side."""
        weight = torch.cat([state[f"{p}.weight"] for p in prefixes])
        layer = nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight = nn.Parameter(weight, requires_grad=False)
        layer.bias = nn.Parameter(torch.cat([state[f"{p}.bias"] for p in prefixes]), requires_grad=False)
        return layer

    def norm(prefix: str) -> nn.LayerNorm:
        layer = nn.LayerNorm(hidden, eps=eps)
        layer.weight = nn.Parameter(state[f"{prefix}.weight"], requires_grad=False)
        layer.bias = nn.Parameter(state[f"{prefix}.bias"], requires_grad=False)
        return layer

    class Layer(nn.Module):
        def __init__(self, prefix: str) -> None:
            super().__init__()
            self.qkv = stacked([f"{prefix}.attention.self.{name}" for name in ("query", "key", "value")])
            self.attention_out = linear(f"{prefix}.attention.output.dense")
            self.attention_norm = norm(f"{prefix}.attention.output.LayerNorm")
            self.intermediate = linear(f"{prefix}.intermediate.dense")
            self.out = linear(f"{prefix}.output.dense")
            self.out_norm = norm(f"{prefix}.output.LayerNorm")

        def forward(self, x: Any, mask: Any) -> Any:
            batch, tokens, _ = x.shape

            def split(t: Any) -> Any:
                return t.view(batch, tokens, heads, hidden // heads).transpose(1, 2)

            query, key, value = self.qkv(x).split(hidden, dim=-1)
            context = functional.scaled_dot_product_attention(
                split(query), split(key), split(value), attn_mask=mask
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

        def forward(self, ids: Any, positions: Any, segments: Any) -> Any:
            """``ids``, ``positions`` and ``segments`` (rows x tokens): a token attends only to the
            tokens of its own segment (a text of the row); padding is segment -1."""
            x = self.norm(self.words(ids) + self.types(torch.zeros_like(ids)) + self.positions(positions))
            allowed = (segments[:, :, None] == segments[:, None, :]) & (segments[:, None, :] >= 0)
            additive = (~allowed[:, None]).to(x.dtype) * torch.finfo(x.dtype).min
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
        self.tokenizer.no_padding()

    def to_bfloat16(self) -> None:
        """bfloat16 weights and activations inside the encoder; pooling stays float32."""
        import torch

        self.module.to(torch.bfloat16)

    def encode(self, texts: Sequence[str], batch_size: int = 32, **_: Any) -> np.ndarray:
        import torch

        out = []
        for lo in range(0, len(texts), batch_size):
            tokens = [e.ids for e in self.tokenizer.encode_batch(list(texts[lo : lo + batch_size]))]
            rows = packed_rows([len(t) for t in tokens], self.max_seq_length)
            width = max(sum(len(tokens[i]) for i in row) for row in rows)
            ids = torch.zeros((len(rows), width), dtype=torch.long)
            positions = torch.zeros((len(rows), width), dtype=torch.long)
            segments = torch.full((len(rows), width), -1, dtype=torch.long)
            spans: dict[int, tuple[int, int, int]] = {}  # text -> (row, start, end)
            for r, row in enumerate(rows):
                start = 0
                for i in row:
                    end = start + len(tokens[i])
                    ids[r, start:end] = torch.tensor(tokens[i])
                    positions[r, start:end] = torch.arange(len(tokens[i]))
                    segments[r, start:end] = i
                    spans[i] = (r, start, end)
                    start = end
            with torch.inference_mode():
                states = self.module(ids, positions, segments).float()
            cls = self.settings["pooling"] == "cls"
            vectors = torch.stack(
                [
                    states[r, a] if cls else states[r, a:b].mean(0)
                    for r, a, b in (spans[i] for i in range(len(tokens)))
                ]
            )
            if self.settings["normalize"]:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            out.append(vectors.numpy())
        return np.concatenate(out).astype(np.float32, copy=False) if out else np.zeros((0, 0), np.float32)


def packed_rows(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """The texts (indices into ``lengths``, their token counts) packed into rows of at most ``capacity``
    tokens, longest first, each into the first row it fits (first-fit decreasing); a text longer than
    ``capacity`` has a row of its own. Short texts share a row instead of each being padded to the
    longest: the reader's four sentence units hold 29% padding as one padded batch. When sharing would
    not compute fewer tokens than padding (texts of one length), each text keeps a row of its own: a
    shared row's attention spans all of it, masked or not."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    room: list[int] = []
    for i in order:
        r = next((r for r, free in enumerate(room) if lengths[i] <= free), None)
        if r is None:
            rows.append([i])
            room.append(capacity - lengths[i])
        else:
            rows[r].append(i)
            room[r] -= lengths[i]
    width = max((sum(lengths[i] for i in row) for row in rows), default=0)
    if len(rows) * width >= len(lengths) * max(lengths, default=0):
        return [[i] for i in order]
    return rows


def plain_bert_model(model_dir: Path) -> PlainBertModel | None:
    """The plain-torch model of ``model_dir`` when its pipeline is a plain BERT one, else None."""
    settings = plain_bert_settings(model_dir)
    if settings is None:
        return None
    from tokenizers import Tokenizer

    return PlainBertModel(model_dir, settings, Tokenizer.from_file(str(model_dir / "tokenizer.json")))
