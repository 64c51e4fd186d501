"""Encoding: the encoder client shared by the ingest DAG (chunks, windows, vectors) and the search DAG.

A module of its own so that each DAG holds only what its outputs need: the search DAG takes the
encoder for ``query_vector`` without the ingest-only window and chunk vectors of ``nodes.ingest.embedding``.

Config keys: ``embedder`` (variant: ``sentence_transformers`` = torch, ``onnx`` = ONNX Runtime int8 of
the same model, exported once into ``model_cache_dir``), ``embedding_model`` (``minilm`` = the bundled
all-MiniLM-L6-v2, ``BAAI/bge-small-en-v1.5``, or a local path), ``encoder_precision`` (torch: ``auto`` |
``fp32`` | ``bf16``, see ``backends.encoder``). ``model_cache_dir`` is an input the assembly layer sets
to the library's ``cache/models`` (None: a temporary folder per process).
Limitations: CPU only here; the model is loaded once per process (``backends.encoder.load_encoder``,
``backends.onnx_encoder.load_onnx_encoder``) and never stored in the node cache (the registry marks
``encoder`` never cached).
"""

from __future__ import annotations

from hamilton.function_modifiers import config

from folio.nodes.backends.encoder import Encoder, load_encoder


@config.when(embedder="sentence_transformers")
def encoder__sentence_transformers(
    embedding_model: str = "minilm", encoder_precision: str = "auto"
) -> Encoder:
    """The sentence-transformers model and tokenizer (loaded once per process and precision)."""
    return load_encoder(embedding_model, encoder_precision)


@config.when(embedder="onnx")
def encoder__onnx(embedding_model: str = "minilm", model_cache_dir: str | None = None) -> Encoder:
    """The same model as ONNX Runtime int8, exported on first use into ``model_cache_dir``."""
    from folio.nodes.backends.onnx_encoder import load_onnx_encoder

    return load_onnx_encoder(embedding_model, model_cache_dir)
