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
    settings = {"llm": "openai", "llm_base_url": real_llm.url, "llm_model": real_llm.model}
    config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    book = Library(alice_copy).book_ids()[0]
    args = ("summary", book, "1", "--library", str(alice_copy), "--config", str(config), "--json")
    started = time.monotonic()
    first = run_folio(*args)
    first_seconds = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["computed"] is True and made["summary"].strip()
    if made["summariser"] == EXTRACTIVE_ID:  # the tiny model gave nothing usable: said in one note
        assert len(made["notes"]) == 1 and made["notes"][0].startswith("LLM chapter summary failed (")
    else:
        assert made["summariser"] == f"llm:{real_llm.model}:v1" and made["notes"] == []
    started = time.monotonic()
    second = run_folio(*args)
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["computed"] is False and again["summary"] == made["summary"]
    assert again["summariser"] == made["summariser"]
    print(f"first process {first_seconds:.1f} s, second {time.monotonic() - started:.1f} s")
