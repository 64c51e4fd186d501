"""``make bench`` section ``speed`` (issue 14): the int8 ONNX encoder beside torch fp32, CLI start-up, the
default worker count and long-query windows, all in one run on one machine.

- ``encoder``: one book ingested into two fresh libraries, torch fp32 and ``embedder: onnx`` (the ONNX
  export is made first and timed apart); then the raw encoder on exactly that book's windows, both
  runtimes interleaved twice (best of two, CPU and wall time), their speed-up and cosine agreement.
- ``startup``: process wall and CPU time (median of 5, interleaved) of ``folio books``, lexical
  ``folio search`` and cold hybrid ``folio search`` with each embedder, over those libraries.
- ``workers``: the default pool size here and why; ``long_query``: a query longer than one encoder
  window is embedded as windows (its vector against its first window's vector).

Every row carries the load average: the machine is shared, so wall times are noisy and CPU times are
the steadier comparison.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from folio.dataflows.api import ingest
from folio.dataflows.config import CONFIG_DIR, load_config
from folio.dataflows.library import Library
from folio.nodes.backends.encoder import Encoder, load_encoder, text_windows
from folio.nodes.backends.workers import CORES_PER_WORKER, available_cores, pool_size

BOOK = "books/epub/doyle_the-adventures-of-sherlock-holmes.epub"
QUERY = "the speckled band"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_encode(encoder: Encoder, texts: Sequence[str], batch: int) -> tuple[np.ndarray, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = encoder.encode(texts, batch)
    return vectors, time.process_time() - cpu, time.perf_counter() - wall


def encoder_comparison(
    torch_encoder: Encoder, onnx_encoder: Encoder, texts: Sequence[str], batch: int = 32, rounds: int = 2
) -> dict[str, Any]:
    """Both encoders on the same ``texts``, interleaved ``rounds`` times: best CPU and wall seconds,
    windows per second, the speed-ups and the cosine agreement of the vectors."""
    best: dict[str, list[float]] = {"torch_fp32": [1e9, 1e9], "onnx_int8": [1e9, 1e9]}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for name, encoder in (("torch_fp32", torch_encoder), ("onnx_int8", onnx_encoder)):
            vectors[name], cpu, wall = _timed_encode(encoder, texts, batch)
            best[name] = [min(best[name][0], cpu), min(best[name][1], wall)]
    cosine = (vectors["torch_fp32"] * vectors["onnx_int8"]).sum(axis=1)
    out: dict[str, Any] = {"windows": len(texts)}
    for name, (cpu, wall) in best.items():
        out[name] = {
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2),
            "windows_per_s": round(len(texts) / wall, 1),
        }
    out["speedup_cpu"] = round(best["torch_fp32"][0] / best["onnx_int8"][0], 2)
    out["speedup_wall"] = round(best["torch_fp32"][1] / best["onnx_int8"][1], 2)
    out["cosine_mean"] = round(float(cosine.mean()), 4)
    out["cosine_min"] = round(float(cosine.min()), 4)
    out["targets"] = {"speedup": 1.8, "cosine_mean": 0.98}
    return out


def _folio(args: Sequence[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``folio ARGS`` process (it must succeed)."""
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", *args], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise SystemExit(f"bench: folio {' '.join(args)} failed: {done.stderr.strip()[-300:]}")
    return time.perf_counter() - wall, _children_cpu() - cpu


def startup_times(commands: dict[str, list[str]], repeats: int = 5) -> dict[str, Any]:
    """Median wall and CPU seconds of each command, run ``repeats`` times interleaved (the first run of
    each is a warm-up of the file cache and not counted)."""
    for args in commands.values():
        _folio(args)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, args in commands.items():
            runs[name].append(_folio(args))
    return {
        name: {
            "median_wall_s": round(statistics.median(w for w, _ in times), 2),
            "median_cpu_s": round(statistics.median(c for _, c in times), 2),
        }
        for name, times in runs.items()
    }


def long_query(encoder: Encoder) -> dict[str, Any]:
    """A query of about 360 tokens: its windows, and how far its vector is from its first window's."""
    query = " ".join(["Why did the Queen of Hearts order the Knave's head off while the jury wrote?"] * 16)
    query += " And what did the whalers of Nantucket say of the white whale that took Ahab's leg?" * 4
    parts = text_windows(query, encoder.token_offsets(query), encoder.window_tokens)
    first = encoder.encode([parts[0]])[0]
    return {
        "tokens": encoder.count_tokens(query),
        "encoder_window_tokens": encoder.window_tokens,
        "windows": len(parts),
        "cosine_with_first_window_only": round(float(encoder.encode_query(query) @ first), 4),
    }


def speed_bench(data_dir: str | os.PathLike[str], book: str = BOOK) -> dict[str, Any]:
    """The ``speed`` section (see the module docstring)."""
    from folio.nodes.backends.onnx_encoder import load_onnx_encoder

    source = Path(data_dir) / book
    torch_cfg = load_config(overrides={"workers": 1, "encoder_precision": "fp32"})  # the baseline
    onnx_file = CONFIG_DIR / "onnx.yaml"
    onnx_cfg = load_config(onnx_file, overrides={"workers": 1})
    out: dict[str, Any] = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="folio-speed-bench-") as tmp:
        torch_lib, onnx_lib = Library(Path(tmp) / "torch"), Library(Path(tmp) / "onnx")
        torch_encoder = load_encoder(str(torch_cfg["embedding_model"]), "fp32")
        t0 = time.perf_counter()
        onnx_encoder = load_onnx_encoder(str(onnx_cfg["embedding_model"]), str(onnx_lib.model_cache_dir))
        out["onnx_export_s"] = round(time.perf_counter() - t0, 2)
        ingest_s = {}
        for name, lib, cfg in (("torch_fp32", torch_lib, torch_cfg), ("onnx_int8", onnx_lib, onnx_cfg)):
            t0 = time.perf_counter()
            report = ingest([source], library=lib, config=cfg)
            ingest_s[name] = time.perf_counter() - t0
            if not report.ok:
                raise SystemExit(f"bench: ingest failed: {report.errors[0]}")
        out["ingest"] = {
            "book": source.name,
            **{f"{k}_wall_s": round(v, 2) for k, v in ingest_s.items()},
            "speedup_wall": round(ingest_s["torch_fp32"] / ingest_s["onnx_int8"], 2),
        }
        book_id = torch_lib.book_ids()[0]
        store = torch_lib.store(book_id)
        texts = [store.chapter_text(ch)[s:e] for ch, s, e in torch_lib.index.window_spans(book_id)]
        out["encoder_same_windows"] = encoder_comparison(
            torch_encoder, onnx_encoder, texts, int(torch_cfg["embedding_batch_size"])
        )
        out["startup"] = startup_times(
            {
                "books": ["books", "--library", str(torch_lib.path)],
                "search_lexical": ["search", QUERY, "--mode", "lexical", "--library", str(torch_lib.path)],
                "search_hybrid_cold_torch": ["search", QUERY, "--library", str(torch_lib.path)],
                "search_hybrid_cold_onnx": [
                    "search",
                    QUERY,
                    "--library",
                    str(onnx_lib.path),
                    "--config",
                    str(onnx_file),
                ],
            }
        )
        out["startup_targets_s"] = {"books": 0.6, "search_lexical": 0.8, "search_hybrid_cold": 3.0}
    cores = available_cores()
    out["workers"] = {
        "cores": cores,
        "default_pool_size_for_10_books": pool_size(10, None, cores),
        "cores_per_worker": CORES_PER_WORKER,
        "note": "the library_ingest section measures workers 1 vs 2 on the sample books",
    }
    out["long_query"] = long_query(torch_encoder)
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out
