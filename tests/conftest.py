"""Shared fixtures: the real data folder beside the repo and session-scoped ingested libraries."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def fairytale_library(tmp_path_factory, data_dir) -> Path:
    """A library with the three FairytaleQA books (Grimm, Potter, Children's Literature section IV)."""
    path = tmp_path_factory.mktemp("fairytale-library")
    _ingest_into(
        path,
        [
            data_dir / "books/txt/pg19068_grimm_household-stories_lucy-crane.txt",
            data_dir / "books/txt/pg572_potter_great-big-treasury.txt",
            data_dir / "books/epub/curry-clippinger_childrens-literature_section4.epub",
        ],
    )
    return path


@pytest.fixture(scope="session")
def sherlock_library(tmp_path_factory, data_dir) -> Path:
    path = tmp_path_factory.mktemp("sherlock-library")
    _ingest_into(path, [data_dir / "books/epub/doyle_the-adventures-of-sherlock-holmes.epub"])
    return path


@pytest.fixture(scope="session")
def moby_library(tmp_path_factory, data_dir) -> Path:
    path = tmp_path_factory.mktemp("moby-library")
    _ingest_into(path, [data_dir / "books/epub/melville_moby-dick.epub"])
    return path


ALICE_EPUB = BOOKS / "epub/carroll_alice-in-wonderland_abridged-pg19033.epub"


@pytest.fixture(scope="session")
def alice_library(tmp_path_factory, data_dir) -> Path:
    """A library holding only the small abridged Alice EPUB (~10k words): cheap to copy and mutate."""
    path = tmp_path_factory.mktemp("alice-library")
    _ingest_into(path, [ALICE_EPUB])
    return path


@pytest.fixture
def alice_copy(alice_library, tmp_path) -> Path:
    """A private copy of the Alice library (its embedding cache included) for tests that change it."""
    import shutil

    target = tmp_path / "library"
    shutil.copytree(alice_library, target)
    return target
