"""The house limits on size: production modules under 600 lines, functions under 80 (``nodes/``,
``dataflows/``; tests and the benchmarks aside).

The modules and functions over a limit today are listed with their size, as a ratchet: each may only
shrink until it is split on its seams (issue 29), a listed one that fits is taken off the list, and
nothing new may pass a limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_DIR

MODULE_LINES = 600
FUNCTION_LINES = 80
PACKAGES = ("nodes", "dataflows")

# Over the limit today, with their size at most (lines).
KNOWN_MODULES: dict[str, int] = {}
KNOWN_FUNCTIONS: dict[str, int] = {}


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((REPO_DIR / package).rglob("*.py")):
            name = path.relative_to(REPO_DIR).as_posix()
            source = path.read_text(encoding="utf-8")
            modules[name] = len(source.splitlines())
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    key = f"{name}:{node.name}"
                    functions[key] = max(size, functions.get(key, 0))
    return modules, functions


def _over(sizes: dict[str, int], limit: int, known: dict[str, int]) -> list[str]:
    bad = []
    for name, size in sizes.items():
        allowed = known.get(name, limit)
        if size > allowed:
            bad.append(f"{name}: {size} lines (limit {allowed})")
    return bad


def test_no_module_or_function_grows_past_the_limits() -> None:
    modules, functions = _sizes()
    bad = _over(modules, MODULE_LINES, KNOWN_MODULES) + _over(functions, FUNCTION_LINES, KNOWN_FUNCTIONS)
    assert not bad, "\n".join(bad)


def test_the_known_list_names_only_what_is_still_over() -> None:
    modules, functions = _sizes()
    stale = [m for m in KNOWN_MODULES if modules.get(m, 0) <= MODULE_LINES]
    stale += [f for f in KNOWN_FUNCTIONS if functions.get(f, 0) <= FUNCTION_LINES]
    assert not stale, f"fits now, take it off the list: {stale}"


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES + 1))
    tree = ast.parse(f"def long():\n{body}\n")
    (node,) = tree.body
    assert isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > FUNCTION_LINES
    assert _over({"m.py:long": node.end_lineno - node.lineno + 1}, FUNCTION_LINES, {}) == [
        f"m.py:long: {FUNCTION_LINES + 2} lines (limit {FUNCTION_LINES})"
    ]
