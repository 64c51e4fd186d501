"""Chapter summaries with a real model (llama.cpp's server, SmolLM2-135M: ``tests/llm_server.py``): made
once by the first ``folio summary`` process and read back by the second, which asks the model nothing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from folio.dataflows.library import Library
from folio.nodes.backends.summaries import EXTRACTIVE_ID
from folio.nodes.backends.summary_store import store_path
from tests.conftest import run_folio

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]


def test_a_real_model_summary_is_computed_once_across_two_processes(
    real_llm: Any, alice_copy: Path, tmp_path: Path
) -> None:
    shutil.rmtree(store_path(alice_copy).parent, ignore_errors=True)
    config = tmp_path / "llm.yaml"
    settings = {
        "llm": "openai",
        "llm_base_url": real_llm.url,
        "llm_model": real_llm.model,
        "llm_max_tokens": 48,  # short replies: a 135M model on 2 loaded cores writes a few tokens a second
        "llm_timeout_seconds": 110,
        "llm_max_retries": 0,
    }
    config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    book = Library(alice_copy).book_ids()[0]
    view = Library(alice_copy).store(book)
    chapter = min(view.titles, key=lambda c: len(view.chapter_text(c)))  # the shortest prompt
    args = ("summary", book, chapter, "--library", str(alice_copy), "--config", str(config), "--json")
    runs: list[dict[str, Any]] = []
    for _ in range(3):  # a call that times out on a loaded machine gives the extractive one: asked again
        started = time.monotonic()
        done = run_folio(*args)
        assert done.returncode == 0, done.stderr
        runs.append({**json.loads(done.stdout), "seconds": round(time.monotonic() - started, 1)})
        if len(runs) >= 2 and runs[-2]["summariser"] != EXTRACTIVE_ID:
            break
    print([{k: r[k] for k in ("summariser", "computed", "notes", "seconds")} for r in runs])
    for made in runs:
        assert made["summary"].strip()
        if made["summariser"] == EXTRACTIVE_ID:  # the model failed or timed out: said in one note
            assert len(made["notes"]) == 1 and made["notes"][0].startswith("LLM chapter summary failed (")
    llm = [i for i, r in enumerate(runs[:-1]) if r["summariser"] == f"llm:{real_llm.model}:v1"]
    if not llm:
        pytest.skip(
            f"the real model gave no summary in {len(runs)} tries on this machine: {runs[-1]['notes']}"
        )
    first, again = runs[llm[0]], runs[llm[0] + 1]
    assert first["computed"] is True and first["notes"] == []
    assert again["computed"] is False and again["summary"] == first["summary"]  # read back: no LLM call
    assert again["summariser"] == first["summariser"]
