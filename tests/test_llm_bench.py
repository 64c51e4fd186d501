"""``make bench``'s ``llm`` section: what it reports without a server, and for each fresh ask.

The timed asks themselves run in the real-model tier (``tests/test_real_llm.py`` calls ``fresh_asks``
with the same questions against the same server command)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import llm_bench


def test_the_section_says_why_it_is_skipped_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm_bench, "missing", lambda: "llama-cpp-python[server] is not installed: run make")
    assert llm_bench.llm_bench("/nowhere") == {
        "skipped": "llama-cpp-python[server] is not installed: run make"
    }


def test_each_fresh_ask_is_reported_with_its_citations_and_notes_or_its_error() -> None:
    answer = {"answer": "A cat [1].", "citations": [{"chunk_id": "c1"}], "notes": ["router: BOOK"]}
    good = subprocess.CompletedProcess(["folio"], 0, json.dumps(answer), "")
    assert llm_bench._asked("Who?", 12.04, good) == {
        "question": "Who?",
        "seconds": 12.0,
        "citations": 1,
        "notes": ["router: BOOK"],
    }
    bad = subprocess.CompletedProcess(["folio"], 2, "", "folio: error: lib: no such library\n")
    assert llm_bench._asked("Who?", 0.5, bad) == {
        "question": "Who?",
        "seconds": 0.5,
        "error": "folio: error: lib: no such library",
    }


def test_the_server_command_uses_both_cores_and_the_tool_calling_chat_format(tmp_path: Path) -> None:
    command = llm_bench.server_command(tmp_path / "model.gguf", 8123)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    options = dict(zip(command[3::2], command[4::2], strict=True))
    assert options["--chat_format"] == "chatml-function-calling" and options["--port"] == "8123"
    assert options["--n_threads"] == options["--n_threads_batch"] == "2"
