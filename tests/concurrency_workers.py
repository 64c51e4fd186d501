"""Processes for the readers-never-wait-on-writers tests (``tests/test_concurrency.py``, the fault
corpus's ``concurrency`` class): a writer that commits into a library in a loop, and a reader that
reads it many times, each read as a fresh process would (the library's index closed between reads).

    python -m tests.concurrency_workers writer LIB STOP_FILE      # commits until STOP_FILE exists
    python -m tests.concurrency_workers reader LIB N              # N reads; prints "reads R failures F"

The writer alternates adding a generated book and removing it (each a whole ``Library.writer()``
session, as one ``folio ingest`` / ``folio remove`` is), and prints ``commits C`` when it stops. The
reader rotates through ``folio books --json`` and ``folio search`` (lexical; the real CLI ``main``), a
semantic search of the library index and a chapter's text; every failure is one ``FAIL ...`` line.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

WORDS = ["whale", "ship", "captain", "harpoon", "sailor", "island", "storm", "rope", "deck", "mast", "ocean"]


def _book(seed: int) -> object:
    from tests.test_library_index import synthetic_book

    text = [" ".join(WORDS[(seed + i * j) % len(WORDS)] for j in range(40)) + f" loop {i}" for i in range(3)]
    parts = [text]
    return synthetic_book("Looping", parts, book_id="looping-book")


def writer(lib_path: Path, stop: Path) -> int:
    from folio.dataflows.library import Library, close_index
    from tests.test_library_index import staged_book

    commits = 0
    while not stop.exists():
        lib = Library(lib_path)
        with lib.writer():
            if "looping-book" in lib.book_ids():
                lib.remove("looping-book")
            else:
                lib.install(staged_book(_book(commits), lib.staging_dir / f"looping-{commits}"))  # type: ignore[arg-type]
        close_index(lib_path)
        commits += 1
    print(f"commits {commits}", flush=True)
    return 0


def _cli(argv: list[str]) -> tuple[int, str]:
    from folio.dataflows.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue().strip()


def one_read(lib_path: Path, i: int) -> str | None:
    """The ``i``-th read of the rotation; why it failed, or None."""
    import numpy as np

    from folio.dataflows.library import Library

    lib = str(lib_path)
    kind = i % 4
    if kind == 0:
        code, err = _cli(["books", "--json", "--library", lib])
        return None if code == 0 and not err else f"books exit {code}: {err}"
    if kind == 1:
        code, err = _cli(["search", "whale harpoon", "--mode", "lexical", "--library", lib])
        return None if code == 0 and not err else f"search exit {code}: {err}"
    library = Library(lib_path)
    index = library.index
    if kind == 2:
        ndim = int(index.settings().get("ndim", 0) or 0)
        hits = index.semantic(np.ones(ndim, dtype=np.float32), k=5) if ndim else []
        return None if hits else "semantic search found nothing"
    stores = library.stores(None)
    if not stores:
        return "no books"
    store = stores[0]
    text = store.chapter_text(next(iter(store.titles)))
    return None if text else "an empty chapter"


def reader(lib_path: Path, n: int) -> int:
    from folio.dataflows.library import close_index

    failures = 0
    for i in range(n):
        try:
            why = one_read(lib_path, i)
        except Exception as exc:  # every exception is a failed read, counted and named
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            failures += 1
            print(f"FAIL read {i}: {' '.join(why.split())[:300]}", flush=True)
        close_index(lib_path)  # the next read opens the library as a fresh process would
    print(json.dumps({"reads": n, "failures": failures}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    role, lib = argv[0], Path(argv[1])
    if role == "writer":
        return writer(lib, Path(argv[2]))
    if role == "reader":
        return reader(lib, int(argv[2]))
    raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
