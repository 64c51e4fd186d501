"""Shared fixtures: the real data folder beside the repo and session-scoped ingested libraries.

Two tiers: tests that load the sentence-transformers encoder or ingest a book get the ``model`` marker
here (``pytest_collection_modifyitems``), a few long ones without a model the ``slow`` marker, so that
``make test-fast`` (``pytest -m "not model and not slow"``) runs the rest in minutes; ``make test``
runs everything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_DIR = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("FOLIO_TEST_DATA", REPO_DIR.parent / "shared" / "data"))
BOOKS = DATA_DIR / "books"
ZIMS = DATA_DIR / "zim"
QA = DATA_DIR / "qa"

# The fast tier. Fixtures that load the encoder or ingest a book, directly or through another fixture
# (pytest's ``item.fixturenames`` is the closure: a fixture built on ``alice_library`` counts too);
# ``stored_book`` (test_concepts) picks a ``*_library`` fixture by name at run time.
MODEL_FIXTURES = frozenset({"encoder", "alice_copy", "stored_book", "onnx_minilm", "minilm_dir"})
# Tests that load the encoder or ingest without one of those fixtures (in the test body, or in worker
# processes), as ``module::test``. Found by running ``pytest -m "not model" --forbid-model --durations=0``.
MODEL_TESTS = frozenset(
    {
        "test_caching::test_edited_chapter_reembeds_only_its_windows",
        "test_caching::test_clients_are_versioned_but_never_stored",
        "test_parallel::test_process_pool_ingests_a_folder_of_books_and_a_bad_book_fails_alone",
        "test_parallel::test_dask_local_cluster_ingests_the_same_books_and_a_bad_book_fails_alone",
    }
)
# Whole modules whose every test needs the model (none at present).
MODEL_MODULES: frozenset[str] = frozenset()
# Tests that load no model but take many seconds (a full bench, worker processes, a 30-second loop of
# reads beside a writer): marked ``slow`` here, beside the tests marked ``slow`` in their modules. The
# fast tier's six slowest were added 2026-12-06 (7-33 s each, 80 s of its 6 min).
SLOW_TESTS = frozenset(
    {
        "test_kiwix_query::test_the_engine_alone_fails_on_raw_questions",
        "test_kiwix_query::test_exact_top1_with_all_zims_loaded_meets_the_target",
        "test_kiwix_query::test_bench_reports_latency_for_both_backends",
        "test_parallel::test_two_processes_write_the_hamilton_metadata_store_at_once",
        "test_safe_serving::test_served_reads_never_fail_while_another_process_commits",
        "test_caching::test_an_uncached_ingest_neither_reads_nor_writes_window_vectors",
        "test_kiwix_query::test_pipeline_beats_the_stop_word_stripped_engine_with_the_right_zim",
        "test_concept_normalising::test_with_an_llm_the_ingested_map_has_its_types_merges_and_labels",
        "test_hardening_cli::test_a_damaged_descriptor_fails_that_book_alone_and_doctor_names_it",
        "test_ask::test_ask_against_trickling_servers_returns_within_its_deadline_and_the_process_exits",
    }
)


def _test_key(item: pytest.Item) -> str:
    return f"{item.path.stem}::{getattr(item, 'originalname', item.name)}"


def _loads_model(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if names & MODEL_FIXTURES or any(name.endswith("_library") for name in names):
        return True
    return item.path.stem in MODEL_MODULES or _test_key(item) in MODEL_TESTS


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--forbid-model",
        action="store_true",
        help="fail any test that loads the encoder (plain BERT or sentence-transformers) in this process "
        '(with -m "not model": checks that the fast tier needs no model)',
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--forbid-model"):
        import sentence_transformers

        from folio.nodes.backends import bert

        def _forbidden(self: object, *args: object, **kwargs: object) -> None:
            raise RuntimeError("this test loads the encoder: add it to MODEL_TESTS in tests/conftest.py")

        sentence_transformers.SentenceTransformer.__init__ = _forbidden  # type: ignore[method-assign]
        bert.PlainBertModel.__init__ = _forbidden  # type: ignore[method-assign]


# With pytest-xdist (``make test``) the modules run in this order, then the rest in pytest's order: the
# longest first, so that no long module starts last while the other worker idles (``--dist loadfile
# --no-loadscope-reorder``; xdist's own order counts tests, not time). Each worker takes two modules at
# the start (1 and 3, 2 and 4), then the next free one, so the first two need different libraries:
# test_phrases ingests Moby-Dick while test_real_llm needs only the abridged Alice. Order from the 40
# slowest items of a two-worker run (2026-12-07); the per-module totals of a full run
# (``PYTEST_ADDOPTS=--durations=0``) would also place test_install, test_safe_serving, test_fault_corpus
# and test_hardening_cli higher. A module missing here only runs later.
LONGEST_FIRST = (
    "test_phrases",
    "test_real_llm",
    "test_concepts",
    "test_parallel",
    "test_book_tools",
    "test_backends_bert",
    "test_eval_fairytaleqa",
    "test_caching",
    "test_readers",
    "test_install",
    "test_syncing",
    "test_calibre",
    "test_mcp_session",
    "test_fullsize_bench",
    "test_safe_serving",
    "test_answering",
    "test_library",
)


def module_rank(stem: str) -> int:
    """Where a test module runs under pytest-xdist: its place in ``LONGEST_FIRST``, else after them."""
    return LONGEST_FIRST.index(stem) if stem in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:  # every worker sorts alike: xdist checks the collections match
        items.sort(key=lambda item: module_rank(item.path.stem))  # stable: a module's tests keep their order
    for item in items:
        if _loads_model(item):
            item.add_marker(pytest.mark.model)
        if _test_key(item) in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.fail(f"real test data not found at {DATA_DIR} (expected ../shared/data beside the repo)")
    return DATA_DIR


@pytest.fixture(scope="session")
def encoder():
    """The bundled MiniLM encoder, loaded once per test session."""
    from folio.nodes.backends.encoder import load_encoder

    return load_encoder("minilm")


def _ingest_into(path: Path, files: list[Path]):
    from folio.dataflows.api import ingest

    report = ingest(files, library=path)
    assert report.ok, [str(e) for e in report.errors]
    return report


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _session_library(tmp_path_factory, name: str, files: list[Path]) -> Path:
    """A library of ``files``, ingested once per test run. ``make test`` runs two pytest-xdist workers
    (``-n 2 --dist loadfile``): the first worker to need the library ingests it into the run's shared
    temporary folder under a file lock, the other waits and reads the same one (these libraries are only
    read; tests that change one copy ``alice_copy``)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        path = tmp_path_factory.mktemp(name)
        _ingest_into(path, files)
        return path
    root = tmp_path_factory.getbasetemp().parent
    path, done = root / name, root / f"{name}.done"
    with _locked(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            _ingest_into(path, files)
            done.touch()
    return path


@pytest.fixture(scope="session")
def fairytale_library(tmp_path_factory, data_dir) -> Path:
    """A library with the three FairytaleQA books (Grimm, Potter, Children's Literature section IV)."""
    return _session_library(
        tmp_path_factory,
        "fairytale-library",
        [
            data_dir / "books/txt/pg19068_grimm_household-stories_lucy-crane.txt",
            data_dir / "books/txt/pg572_potter_great-big-treasury.txt",
            data_dir / "books/epub/curry-clippinger_childrens-literature_section4.epub",
        ],
    )


@pytest.fixture(scope="session")
def time_machine_library(tmp_path_factory, data_dir) -> Path:
    return _session_library(
        tmp_path_factory, "time-machine-library", [data_dir / "books/txt/pg35_wells_the-time-machine.txt"]
    )


@pytest.fixture(scope="session")
def sherlock_library(tmp_path_factory, data_dir) -> Path:
    return _session_library(
        tmp_path_factory,
        "sherlock-library",
        [data_dir / "books/epub/doyle_the-adventures-of-sherlock-holmes.epub"],
    )


@pytest.fixture(scope="session")
def moby_library(tmp_path_factory, data_dir) -> Path:
    return _session_library(
        tmp_path_factory, "moby-library", [data_dir / "books/epub/melville_moby-dick.epub"]
    )


ALICE_EPUB = BOOKS / "epub/carroll_alice-in-wonderland_abridged-pg19033.epub"


@pytest.fixture(scope="session")
def real_llm():
    """One real llama.cpp server (SmolLM2-135M) for the whole session, stopped by PID at the end."""
    from tests.llm_server import start_llama_server

    server = start_llama_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def alice_library(tmp_path_factory, data_dir) -> Path:
    """A library holding only the small abridged Alice EPUB (~10k words): cheap to copy and mutate."""
    return _session_library(tmp_path_factory, "alice-library", [ALICE_EPUB])


@pytest.fixture
def alice_copy(alice_library, tmp_path) -> Path:
    """A private copy of the Alice library (its embedding cache included) for tests that change it."""
    import shutil

    target = tmp_path / "library"
    shutil.copytree(alice_library, target)
    return target


def run_folio(*args: str) -> subprocess.CompletedProcess:
    """``folio ARGS`` in a fresh interpreter (the repo on the path), output captured as text."""
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    return subprocess.run(
        [sys.executable, "-m", "folio.dataflows.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
