"""The ``http`` section of ``make bench``: ``folio ask`` over HTTP against a real ``folio serve``.

A ``folio serve`` process (no LLM) is started on 127.0.0.1 over a library of the Potter treasury (the
``ask`` section's book and questions, ingested into a temporary library unless one is given) and
stopped by PID. Measured from this process with httpx: warm latency p50/p95 with one client asking the
100 questions in turn, then throughput (asks per second) and latency with ``CLIENTS`` clients asking
concurrently, and how many requests failed (any status but 200, or a transport error).

    python -m bench.serve_bench --data ../shared/data [--library LIB]

Limitations: the clients run on the same machine as the server and take some of its cores; the figure
is what a user with a browser or an MCP client beside the server gets.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.measuring import (
    free_port,
    latency_summary,
    potter_library,
    potter_questions,
    wait_until_answering,
)
from folio.nodes.core.types import FolioError

CLIENTS = 8
ROUNDS = 1  # each concurrent client asks every question once, starting at its own place
START_SECONDS = 180.0


def served(library: Path, port: int) -> subprocess.Popen[bytes]:
    """``folio serve --library LIBRARY --port PORT`` in a new process (no LLM), ready to answer."""
    env = {**os.environ, "HAMILTON_TELEMETRY_ENABLED": "false", "FOLIO_LLM": "none", "LLM": "none"}
    command = ["serve", "--library", str(library), "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.dataflows.cli", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = wait_until_answering(process, f"http://127.0.0.1:{port}/api/health", START_SECONDS, 0.2)
    if state == "exited":
        raise FolioError("folio serve", f"exited with {process.returncode} before answering")
    if state == "silent":
        process.kill()
        raise FolioError("folio serve", f"did not answer within {START_SECONDS:.0f} s")
    return process


def _ask(client: httpx.Client, question: str) -> tuple[float, bool]:
    t0 = time.perf_counter()
    try:
        ok = client.post("/api/ask", json={"question": question}).status_code == 200
    except httpx.HTTPError:
        ok = False
    return (time.perf_counter() - t0) * 1000, ok


def http_bench(data_dir: str | os.PathLike[str], library: str | Path | None = None) -> dict[str, Any]:
    """Ask over HTTP: one client's warm p50/p95, and ``CLIENTS`` concurrent clients' throughput."""
    _book, questions = potter_questions(data_dir)
    with potter_library(data_dir, library) as lib:
        return _served_asks(lib, questions)


def _served_asks(library: Path, questions: list[str]) -> dict[str, Any]:
    """The measurements against a ``folio serve`` of ``library`` started (and stopped) here."""
    port = free_port()
    process = served(library, port)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            for q in questions[:5]:  # warm: drivers, caches, the encoder's first calls
                _ask(client, q)
            one = [_ask(client, q) for q in questions]

        def client_run(seed: int) -> list[tuple[float, bool]]:
            order = questions[seed:] + questions[:seed]
            with httpx.Client(base_url=base, timeout=60) as own:
                return [_ask(own, q) for _ in range(ROUNDS) for q in order]

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            runs = list(pool.map(client_run, range(0, CLIENTS * 7, 7)))
        wall = time.perf_counter() - t0
        loaded = [r for run in runs for r in run]
        return {
            "questions": len(questions),
            "one_client": {
                **latency_summary([ms for ms, _ in one], 1),
                "failed": sum(not ok for _, ok in one),
            },
            "concurrent": {
                "clients": CLIENTS,
                "asks": len(loaded),
                "asks_per_s": round(len(loaded) / wall, 1),
                **latency_summary([ms for ms, _ in loaded], 1),
                "failed": sum(not ok for _, ok in loaded),
            },
        }
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--library", default=None, help="a library holding the Potter treasury")
    args = parser.parse_args(argv)
    print(json.dumps(http_bench(Path(args.data).resolve(), args.library), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
