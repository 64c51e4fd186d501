"""A clean install: the wheel built from the repo works on its own, away from the repo.

The wheel goes into a fresh virtual environment that sees the third-party dependencies already installed
in the repo's venv (one path line in a ``.pth`` file: a path line does not run that folder's own ``.pth``
files, so the repo's editable install stays out) and nothing of the repo itself. Every command then runs
from a scratch working directory with the installed console script and the installed config files.
Also here: production code never reads ``tests/``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ALICE_EPUB, REPO_DIR

# Copied into the build folder: what the wheel is built from (pyproject names the packages explicitly).
_NOT_BUILT_FROM = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.pyc",
    "build",
    "dist",
    "*.egg-info",
    ".*_cache",
    ".typecheck",
    ".folio-demo",
    ".bench",
    "tests",
    "viz",
)
# Config variants that need a server or a model outside the bundle: they must load, and `folio ask`
# with them may fail, but only with a one-line error.
NEEDS_A_SERVER = {"openai.yaml", "agent.yaml", "kiwix-http.yaml", "dask.yaml", "bge.yaml"}


@dataclass(frozen=True)
class Install:
    wheel: Path
    venv: Path
    site_packages: Path
    configs: Path
    workdir: Path

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """The installed ``folio`` console script, run from the scratch working directory."""
        return subprocess.run(
            [str(self.venv / "bin" / "folio"), *args],
            cwd=self.workdir,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python(self, code: str) -> str:
        out = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code],
            cwd=self.workdir,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "FOLIO_LIBRARY", "VIRTUAL_ENV"}}
    env.update(
        HAMILTON_TELEMETRY_ENABLED="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def _check(out: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert out.returncode == 0, f"rc={out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    assert "Traceback" not in out.stderr, out.stderr
    return out


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Install:
    """The wheel, built from a copy of the repo and installed into a fresh venv (tests using it:
    ``model``)."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    shutil.copytree(REPO_DIR, source, ignore=_NOT_BUILT_FROM, symlinks=True)
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, "."],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("folio-*.whl")

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    site_packages = Path(
        subprocess.run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # The repo venv's third-party packages, visible as a plain path (its .pth files are not processed).
    (site_packages / "_repo_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    workdir = root / "work"
    workdir.mkdir()
    return Install(wheel, venv, site_packages, site_packages / "folio" / "configs", workdir)


@pytest.fixture(scope="module")
def library(install: Install) -> str:
    out = _check(install.run("ingest", str(ALICE_EPUB), "--library", "L", "--quiet"))
    assert out.stdout == ""
    assert (install.workdir / "L").is_dir()
    return "L"


@pytest.mark.model
def test_wheel_holds_the_folio_namespace_only(install):
    names = zipfile.ZipFile(install.wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"folio", install.wheel.name.split("-py")[0] + ".dist-info"}
    assert not any(name.startswith(("nodes/", "dataflows/", "configs/", "bench/")) for name in names)
    # The benchmarks live in bench/ beside the package and never ship (the build copy holds bench/).
    bench_modules = {p.name for p in (REPO_DIR / "bench").glob("*.py")} - {"__init__.py", "__main__.py"}
    assert bench_modules and not {Path(n).name for n in names} & bench_modules
    for required in (
        "folio/configs/default.yaml",
        "folio/configs/experiments/fairytaleqa-chunking.yaml",
        "folio/nodes/py.typed",
        "folio/dataflows/py.typed",
        "folio/nodes/backends/__init__.py",
        "folio/dataflows/cli.py",
    ):
        assert required in names
    shipped = {Path(n).name for n in names if re.fullmatch(r"folio/configs/[^/]+\.yaml", n)}
    assert shipped == {p.name for p in (REPO_DIR / "configs").glob("*.yaml")}


@pytest.mark.model
def test_the_fresh_venv_imports_folio_from_its_own_site_packages(install):
    where = install.python(
        "import importlib.util, folio.nodes, folio.dataflows.config as c;"
        "print(folio.nodes.__file__); print(c.DEFAULT_CONFIG);"
        "print(importlib.util.find_spec('nodes'), importlib.util.find_spec('dataflows'))"
    )
    nodes_init, default_config, top_level = where.splitlines()
    assert Path(nodes_init).is_relative_to(install.site_packages)
    assert Path(default_config) == install.configs / "default.yaml"
    assert top_level == "None None"
    assert str(REPO_DIR) not in where


@pytest.mark.model
def test_version_is_the_installed_distributions(install):
    version = install.python("import importlib.metadata as m; print(m.version('folio'))")
    out = _check(install.run("--version"))
    assert out.stdout.strip() == f"folio {version}"


@pytest.mark.model
def test_ingest_search_and_ask_from_the_installed_package(install, library):
    books = _check(install.run("books", "--library", library, "--json"))
    assert "Alice" in books.stdout

    lexical = _check(install.run("search", "white rabbit", "--library", library, "--mode", "lexical"))
    assert lexical.stdout.startswith("[1] ") and "rabbit" in lexical.stdout.lower()
    hybrid = _check(install.run("search", "white rabbit", "--library", library))
    assert hybrid.stdout.startswith("[1] ") and "rabbit" in hybrid.stdout.lower()

    answer = _check(install.run("ask", "Who is the White Rabbit?", "--library", library))
    assert "rabbit" in answer.stdout.lower()


@pytest.mark.model
def test_every_shipped_config_loads_from_the_installed_package(install, library):
    configs = sorted(install.configs.glob("*.yaml"))
    assert {c.name for c in configs} >= {"default.yaml", "lexical.yaml", *NEEDS_A_SERVER}
    for config in configs:
        if config.name in NEEDS_A_SERVER:
            continue
        # a library holds one embedder's vectors: a config with another embedder gets its own library
        embedder = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("embedder")
        lib = library if embedder in (None, "sentence_transformers") else f"{library}-{embedder}"
        _check(install.run("ingest", str(ALICE_EPUB), "--library", lib, "--config", str(config), "--quiet"))
        search = _check(install.run("search", "white rabbit", "--library", lib, "--config", str(config)))
        assert search.stdout.startswith("[1] "), config.name
        answer = _check(
            install.run("ask", "Who is the White Rabbit?", "--library", lib, "--config", str(config))
        )
        assert "rabbit" in answer.stdout.lower(), config.name


@pytest.mark.model
@pytest.mark.parametrize("name", sorted(NEEDS_A_SERVER))
def test_configs_that_need_a_server_fail_in_one_line_at_most(install, library, name):
    config = install.configs / name
    out = install.run(
        "ask", "Who is the White Rabbit?", "--library", library, "--config", str(config), timeout=300
    )
    assert "Traceback" not in out.stderr, out.stderr
    assert "config file not found" not in out.stderr
    if out.returncode != 0:
        assert out.returncode == 1 and out.stderr.startswith("folio: "), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


# --- production code never reads tests/ ---------------------------------------------------------------

# configs/experiments/ is left out: experiment files are example user data (a user edits their paths),
# and the shipped Kiwix experiment names the repo's question sets by a path relative to the file
# (../../tests/qa/...), which resolves in a checkout beside ../shared/data, as its paths to the ZIMs do.
_TESTS_PATH = re.compile(r"^(\.\./)*tests(/|$)|/tests(/|$)")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings, with their line numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_production_code_never_names_a_path_under_tests():
    found = []
    for folder in ("nodes", "dataflows"):
        for path in sorted((REPO_DIR / folder).rglob("*.py")):
            found += [f"{path}:{line}: {s!r}" for line, s in _code_strings(path) if _TESTS_PATH.search(s)]
    for path in sorted((REPO_DIR / "configs").glob("*.yaml")):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            value = line.split("#", 1)[0]
            if re.search(r"(^|[\s'\"/])tests/", value):
                found.append(f"{path}:{line_no}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_tests_path_check_catches_a_path_and_spares_prose(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Reads tests/qa/x.jsonl in the docstring only."""\n'
        'HELP = "the question sets (tests/qa in the repo)"\n'
        'QA = REPO / "tests" / "qa"\n'
        'FILE = "../tests/qa/kiwix.jsonl"\n'
    )
    flagged = {s for _, s in _code_strings(module) if _TESTS_PATH.search(s)}
    assert flagged == {"tests", "../tests/qa/kiwix.jsonl"}
