"""The order ``make test`` runs the modules in under pytest-xdist (``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST, REPO_DIR, module_rank


def test_every_module_named_first_exists_once() -> None:
    modules = {p.stem for p in (REPO_DIR / "tests").glob("test_*.py")}
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert set(LONGEST_FIRST) <= modules, set(LONGEST_FIRST) - modules


def test_the_named_modules_come_first_in_their_order_and_the_rest_keep_theirs() -> None:
    stems = ["test_cli", "test_real_llm", "test_apps", "test_phrases"]
    assert sorted(stems, key=module_rank) == ["test_phrases", "test_real_llm", "test_cli", "test_apps"]


def test_make_test_keeps_this_order_instead_of_xdists() -> None:
    recipe = (REPO_DIR / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "--dist loadfile" in recipe and "--no-loadscope-reorder" in recipe
    assert Path(__file__).stem not in LONGEST_FIRST
